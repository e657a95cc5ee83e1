use crate::policy::ToolPolicy;
use crate::tool::DynTool;
use minibot_llm::ToolSpec;
use std::collections::HashMap;
use std::sync::Arc;

/// The tools one agent can call, in the order they are offered to the model.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn DynTool>>,
    index: HashMap<String, usize>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a later tool with the same name replaces the earlier one.
    pub fn register(&mut self, tool: Arc<dyn DynTool>) {
        let name = tool.name().to_string();
        match self.index.get(&name) {
            Some(&slot) => self.tools[slot] = tool,
            None => {
                self.index.insert(name, self.tools.len());
                self.tools.push(tool);
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.index.get(name).map(|&slot| &self.tools[slot])
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Adds the tools of `other` whose names this registry does not have yet, keeping its own.
    pub fn register_missing(&mut self, other: &ToolRegistry) {
        for tool in &other.tools {
            if self.get(tool.name()).is_none() {
                self.register(Arc::clone(tool));
            }
        }
    }

    /// The tools the policy permits.
    pub fn filtered(&self, policy: &ToolPolicy) -> Self {
        let mut out = Self::new();
        for tool in &self.tools {
            if policy.permits(tool.name()) {
                out.register(Arc::clone(tool));
            }
        }
        out
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
