use minibot_agent::{Tool, ToolContext, ToolError, ToolResult, excerpt};
use minibot_skills::SkillRegistry;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// `activate_skill`: a skill's full instructions, its folder and the other files in it. Its result spills to a
/// managed file only past 64,000 characters (the spill wrapper knows it by name, see `minibot_agent::spill`),
/// so instructions normally arrive whole.
pub struct ActivateSkill {
    skills: Arc<SkillRegistry>,
}

impl ActivateSkill {
    pub fn new(skills: Arc<SkillRegistry>) -> Self {
        Self { skills }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    name: String,
}

impl Tool for ActivateSkill {
    type Args = Args;

    fn name(&self) -> &str {
        "activate_skill"
    }

    fn description(&self) -> String {
        "Load the full instructions for a named skill.\n\nUse this after calling `list_skills` when a user request \
         matches one of the discovered skills. Call this before starting work that the skill covers.\n\nProvide:\n\
         - name: exact skill name returned by `list_skills`.\n\nThe response includes the full skill instructions \
         wrapped in <skill-instructions> tags, the skill directory path, a list of supporting resource files, and \
         `compatibility` when the skill declares its requirements. Load resource files on demand using available \
         file tools when the skill instructions reference them.\n\nIf the instructions or `compatibility` need a \
         tool or program you do not have this turn (for example `bash`, `npx`, or an HTTP tool), tell the user \
         exactly what is missing and stop. Do not substitute a different tool to imitate the missing one."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "Exact skill name returned by list_skills." }
            },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let name = args.name.trim();
        if name.is_empty() {
            return Err(ToolError::invalid_arguments("name must not be empty"));
        }
        let Some(skill) = self.skills.get(name) else {
            return Err(ToolError::respond(
                "skill_not_found",
                format!("skill '{}' is not available; call list_skills for the skills there are", excerpt(name)),
            ));
        };
        let mut result = json!({
            "ok": true,
            "skill": skill.name,
            "instructions": format!("<skill-instructions>\n{}\n</skill-instructions>", skill.body),
            "skill_dir": skill.dir_label(),
            "source": skill.source.as_str(),
            "resources": skill.resources(),
        });
        if let Some(compatibility) = &skill.compatibility {
            result["compatibility"] = json!(compatibility);
        }
        Ok(result)
    }
}
