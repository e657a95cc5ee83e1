use super::WriteAccess;
use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_skills::{SkillRegistry, describe};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// `list_skills`: up to eight skills ranked against an optional query, read live from disk.
pub struct ListSkills {
    skills: Arc<SkillRegistry>,
    access: WriteAccess,
}

impl ListSkills {
    pub fn new(skills: Arc<SkillRegistry>, access: WriteAccess) -> Self {
        Self { skills, access }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    query: Option<String>,
}

impl Tool for ListSkills {
    type Args = Args;

    fn name(&self) -> &str {
        "list_skills"
    }

    fn description(&self) -> String {
        "Discover the currently available skills from disk.\n\nUse this before `activate_skill` when you need to \
         find a skill name, confirm whether a skill exists, or search for the best matching skill.\n\nProvide:\n\
         - query: optional search text to filter and rank skills by name or description.\n\nThe response includes \
         the current matching skill names and descriptions. If you want full instructions, call `activate_skill` \
         with the exact returned skill name."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": ["string", "null"],
                    "description": "Optional search text to filter and rank skills by name or description."
                }
            },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let query = args.query.map(|q| q.trim().to_string()).filter(|q| !q.is_empty());
        let total = self.skills.skills().len();
        let ranked = self.skills.search(query.as_deref());
        let matches: Vec<Value> = ranked
            .matches
            .iter()
            .map(|skill| {
                json!({ "name": skill.name, "description": describe(&skill.description), "source": skill.source.as_str() })
            })
            .collect();
        Ok(json!({
            "ok": true,
            "query": query,
            "total_available": total,
            "returned": matches.len(),
            "used_fuzzy_fallback": ranked.used_fuzzy_fallback,
            "write_dir": self.skills.write_dir().to_string_lossy(),
            "write_dir_access": self.access.access,
            "write_dir_filesystem_path": self.access.filesystem_path,
            "discovery_paths": self.skills.discovery_paths(),
            "matches": matches,
        }))
    }
}
