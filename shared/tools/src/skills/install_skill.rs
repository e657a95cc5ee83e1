use minibot_agent::{APPROVAL_DENIED_CODE, ApprovalRequest, Tool, ToolContext, ToolError, ToolResult, ask_approval};
use minibot_skills::install::to_json;
use minibot_skills::{InstallRequest, Installer};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;

/// `install_skill`: previews, then installs, a published skill into the skill write folder (see
/// `minibot_skills::install`). Main agent only, with `[tools.skills] install = true`.
pub struct InstallSkill {
    installer: Installer,
    /// What a relative local `source` (`./x.zip`) is relative to: the managed root, else the working folder.
    base: Option<PathBuf>,
    /// Where an install without `dest` goes, for the approval question.
    write_dir: PathBuf,
}

impl InstallSkill {
    pub fn new(installer: Installer, base: Option<PathBuf>, write_dir: PathBuf) -> Self {
        Self { installer, base, write_dir }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    source: String,
    #[serde(default)]
    skill: Option<String>,
    #[serde(default)]
    install: Option<bool>,
    #[serde(default)]
    expected_hash: Option<String>,
    #[serde(default)]
    force: Option<bool>,
    #[serde(default)]
    dest: Option<String>,
}

impl Tool for InstallSkill {
    type Args = Args;

    fn name(&self) -> &str {
        "install_skill"
    }

    fn description(&self) -> String {
        "Download a skill from GitHub or an archive URL and install it into the skill directory. The equivalent \
         of `npx skills add`.\n\nActivate the `install-skill` skill first for the full procedure. In short: \
         preview, show the user what you found, install only after they confirm, then verify with \
         `list_skills`.\n\nProvide:\n- source: `owner/repo`, `owner/repo@skill`, `owner/repo/path/to/skill`, a \
         `https://github.com/...` repo, tree or blob URL, an https URL to a `.zip`, `.tar.gz` or `SKILL.md`, or a \
         local path (`/…`, `./…`) to a skill folder or archive.\n- skill: optional skill name, needed when the \
         source holds several skills.\n- install: false (default) returns a preview and writes nothing; true \
         installs.\n- expected_hash: the `hash` of the skill from its preview. Required when install is true; the \
         install fails with `hash_mismatch` if the source changed since the preview.\n- force: overwrite an \
         installed skill of the same name, or install over a skill of the same name found in another location.\n\
         - dest: optional; one of the skill discovery paths. Defaults to the write directory.\n\nThe preview lists \
         each valid skill (name, description, compatibility, `hash`, the start of its instructions, `existing` \
         when a skill of that name is already available, files) and every invalid one with the reason it was \
         rejected. An install returns the installed path and the `skills-lock.json` it updated. The installed \
         skill is never activated automatically. Limits: 10 MiB download, 25 MiB and 1000 files unpacked; links \
         and paths outside the skill folder are refused."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "source": {
                    "type": "string",
                    "description": "owner/repo, owner/repo@skill, owner/repo/path, a GitHub tree/blob URL, an https \
                                    URL to a .zip, .tar.gz or SKILL.md, or a local path."
                },
                "skill": {
                    "type": ["string", "null"],
                    "description": "Skill name to install when the source holds more than one."
                },
                "install": { "type": ["boolean", "null"], "description": "false (default) previews only; true installs." },
                "expected_hash": {
                    "type": ["string", "null"],
                    "description": "The `hash` of the skill from its preview; required when install is true."
                },
                "force": {
                    "type": ["boolean", "null"],
                    "description": "Overwrite an installed skill of the same name, or install over one of the same \
                                    name found in another location."
                },
                "dest": {
                    "type": ["string", "null"],
                    "description": "One of the skill discovery paths; defaults to the write directory."
                }
            },
            "required": ["source"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        if args.source.trim().is_empty() {
            return Err(ToolError::invalid_arguments("source must not be empty"));
        }
        if args.install == Some(true) {
            self.approve(&args, ctx).await?;
        }
        let request = InstallRequest {
            source: args.source,
            skill: args.skill.filter(|s| !s.trim().is_empty()),
            install: args.install.unwrap_or(false),
            expected_hash: args.expected_hash,
            force: args.force.unwrap_or(false),
            dest: args.dest,
        };
        let base = match &self.base {
            Some(base) => base.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        match self.installer.run(request, &base).await {
            Ok(outcome) => Ok(to_json(&outcome)),
            Err(error) => Err(ToolError::respond(error.code(), error.to_string())),
        }
    }
}

impl InstallSkill {
    /// An install writes into a skills folder, whose files become instructions the assistant follows from then on:
    /// like any change there (the guarded folders of the file tools) it needs the user's yes, whatever
    /// `[tools.approval]` says. A preview writes nothing and asks nothing.
    async fn approve(&self, args: &Args, ctx: &ToolContext) -> Result<(), ToolError> {
        let shown = json!({
            "source": args.source,
            "skill": args.skill,
            "expected_hash": args.expected_hash,
            "dest": args.dest,
            "force": args.force.unwrap_or(false),
        });
        let folder = args.dest.clone().unwrap_or_else(|| self.write_dir.display().to_string());
        let replace = if args.force == Some(true) { ", replacing a skill of the same name" } else { "" };
        let reason = format!(
            "installs a skill into {folder}, a skills folder of the assistant{replace}: its instructions are given to \
             the assistant from then on"
        );
        let request = ApprovalRequest::for_call("install_skill", None, &shown, Some(reason));
        ask_approval(ctx, request).await.map_err(|denied| {
            ToolError::respond(APPROVAL_DENIED_CODE, format!("installing a skill needs the user's approval. {denied}"))
        })
    }
}
