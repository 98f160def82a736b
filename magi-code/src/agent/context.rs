//! What a turn sends besides its new input and the replayed conversation: the system prompt and
//! the tool list.

use crate::codemode::{decl, text};
use crate::config::profiles::{self, Profile};
use crate::history::ToolSpec;
use crate::mcp::McpHub;
use crate::runtime::Runtime;
use crate::tools::{ToolKind, ToolRegistry};
use crate::util::schema;
use std::fmt::Write as _;

/// The primary profile (settings `agent`), if any.
fn primary(rt: &Runtime) -> Option<&Profile> {
    profiles::primary(&rt.profiles, rt.settings.agent.as_deref())
}

/// Whether the tool called `name` is offered to the primary agent: every tool, unless the
/// primary profile lists its `tools` (`runner.md` 7). A call to one not offered is refused
/// like an unknown tool.
#[must_use]
pub fn offered(rt: &Runtime, name: &str) -> bool {
    primary(rt)
        .and_then(|p| p.tools.as_ref())
        .is_none_or(|t| t.iter().any(|n| n == name))
}

/// The skills list of the system prompt; empty without skills.
fn skills_list(rt: &Runtime) -> String {
    if rt.skills.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "Skills: each holds instructions for one kind of task. When the task matches a skill's \
         description, read its SKILL.md with read_file (at the absolute path given) before you \
         start, and follow it.",
    );
    for k in &rt.skills {
        let _ = write!(
            s,
            "\n- {}: {} ({})",
            k.name,
            k.description,
            k.path.display()
        );
    }
    s
}

/// The runner's base prompt (`runner.md` 3): the workspace folder and the names of `tools`,
/// the tools the request offers, in its order (fixed for the child's life, so the prompt is
/// byte-stable across steps). Short: small local models have 2k-token windows.
fn base_prompt(rt: &Runtime, tools: &[ToolSpec]) -> String {
    let intro = format!(
        "You are magi-code, a coding agent. You work in the folder {} on the user's machine, \
         with the user's permissions.",
        rt.cwd.display()
    );
    if tools.is_empty() {
        return format!("{intro} You have no tools here. Keep replies short.");
    }
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    format!(
        "{intro} Your tools: {}. Use them to read, search, edit and run what the task needs; \
         paths are relative to that folder unless absolute. Keep replies short and say what \
         you changed.",
        names.join(", ")
    )
}

/// The system prompt of a request offering `tools`: the base prompt naming the workspace and
/// those tools, the skills list, the primary profile's body (`runner.md` 7), then the
/// instructions admitted at `initialize` (`runner.md` 3); empty parts are left out.
#[must_use]
pub fn instructions(rt: &Runtime, tools: &[ToolSpec]) -> String {
    let base = base_prompt(rt, tools);
    let skills = skills_list(rt);
    let body = primary(rt).map_or("", |p| p.body.as_str());
    let parts = [skills.as_str(), body, rt.instructions.as_str()];
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .fold(base, |acc, p| format!("{acc}\n\n{p}"))
}

/// The run's tool table: the built-ins (`task` last), then the MCP servers' tools, then the
/// client's (`client.tools`), only those the primary profile allows; then, with Code Mode,
/// `exec` over them all (with `only`, the others are reachable from code only).
#[must_use]
pub fn table(rt: &Runtime, mcp: Option<&McpHub>) -> ToolRegistry {
    let t = direct_table(rt, mcp);
    let code = &rt.settings.code_mode;
    if !code.enabled {
        return t;
    }
    with_exec(t, code.only)
}

/// `t` with `exec` after its tools, described over every tool of `t`; with `only`, just
/// `exec` and `task` are offered.
#[must_use]
pub fn with_exec(mut t: ToolRegistry, only: bool) -> ToolRegistry {
    let spec = decl::exec_spec(t.all_specs());
    // `exec` is a valid name; a client tool already called so keeps it (MCP names start
    // `mcp__`), and the run then has no Code Mode (`drive::config` looks for kind `code`).
    let _ = t.add(
        spec,
        ToolKind::Code,
        schema::compile(&decl::exec_input_schema()),
        |_, input| text::summary(input["code"].as_str().unwrap_or_default()),
    );
    if only {
        t.offer_only(|s| s.name == decl::EXEC || s.name == super::task::TOOL)
    } else {
        t
    }
}

/// The tools offered directly, Code Mode aside.
fn direct_table(rt: &Runtime, mcp: Option<&McpHub>) -> ToolRegistry {
    let mut t = ToolRegistry::builtin();
    // Names are distinct and valid by construction: `task` is no built-in, the hub offers
    // only valid unique `mcp__` names, and `initialize` refuses client tools that would clash.
    let _ = super::task::add_task(&mut t, rt);
    for tool in mcp.into_iter().flat_map(McpHub::tools) {
        let _ = t.add_mcp(tool);
    }
    for tool in &rt.client_tools {
        let _ = t.add_client(tool);
    }
    t.only(|s| offered(rt, &s.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Settings, Skill};
    use std::path::{Path, PathBuf};

    #[test]
    fn the_base_prompt_and_built_in_tools_fit_in_12_kib() {
        let rt = Runtime::for_tests(
            Path::new("/home/someone/.magi"),
            Path::new("/home/someone/projects/a-fairly-long-project-folder-name"),
        );
        let specs = crate::tools::specs();
        let instructions = instructions(&rt, &specs);
        let bytes = crate::run::compaction::fixed_bytes(&instructions, &specs);
        assert!(bytes <= 12 * 1024, "{bytes} bytes");
    }

    fn tools(rt: &Runtime, mcp: Option<&McpHub>) -> Vec<ToolSpec> {
        table(rt, mcp).specs().to_vec()
    }

    fn rt(agent: Option<&str>, tools: Option<&[&str]>) -> Runtime {
        let settings = Settings {
            agent: agent.map(str::to_owned),
            ..Settings::default()
        };
        Runtime {
            settings,
            instructions: "AGENTS text".into(),
            profiles: vec![Profile {
                name: "rev".into(),
                description: "Reviews.".into(),
                tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
                model: None,
                body: "PROFILE BODY".into(),
            }],
            skills: vec![Skill {
                name: "pdf".into(),
                description: "Fill PDF forms.".into(),
                path: PathBuf::from("/h/skills/pdf/SKILL.md"),
            }],
            ..Runtime::for_tests(Path::new("/r"), Path::new("/w"))
        }
    }

    #[test]
    fn prompt_order_is_base_skills_profile_body_instructions() {
        let r = rt(Some("rev"), None);
        let p = instructions(&r, &tools(&r, None));
        let at = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s} missing from {p}"));
        assert!(at("You are magi-code") < at("- pdf: Fill PDF forms. (/h/skills/pdf/SKILL.md)"));
        assert!(at("read_file") < at("PROFILE BODY"));
        assert!(at("/h/skills/pdf/SKILL.md") < at("PROFILE BODY"));
        assert!(at("PROFILE BODY") < at("AGENTS text"));
        let p = instructions(&rt(None, None), &[]);
        assert!(!p.contains("PROFILE BODY"), "no primary profile, no body");
    }

    #[test]
    fn the_base_prompt_names_the_workspace_and_the_offered_tools_in_order() {
        let r = rt(Some("rev"), Some(&["shell", "read_file"]));
        let offered = tools(&r, None);
        let p = instructions(&r, &offered);
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["read_file", "shell"], "the request's order");
        assert!(p.contains("in the folder /w "), "{p}");
        assert!(p.contains("Your tools: read_file, shell. "), "{p}");
        assert_eq!(p, instructions(&r, &offered), "byte-stable");
        // Every built-in is named when nothing limits them.
        let all = rt(None, None);
        let every = tools(&all, None);
        let p = instructions(&all, &every);
        let list: Vec<&str> = every.iter().map(|t| t.name.as_str()).collect();
        assert!(
            p.contains(&format!("Your tools: {}.", list.join(", "))),
            "{p}"
        );
        // No tools: the prompt does not pretend there are some.
        let none = instructions(&rt(Some("rev"), Some(&[])), &[]);
        assert!(none.contains("You have no tools here.") && !none.contains("Your tools"));
    }

    #[test]
    fn a_primary_profile_with_tools_limits_what_is_offered() {
        let names = |r: &Runtime| {
            tools(r, None)
                .into_iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
        };
        let limited = rt(Some("rev"), Some(&["read_file", "mcp__x__y"]));
        assert_eq!(names(&limited), ["read_file"]);
        assert!(offered(&limited, "mcp__x__y") && !offered(&limited, "shell"));
        let all = names(&rt(Some("rev"), None));
        assert!(all.contains(&"shell".to_owned()) && all.contains(&"read_file".to_owned()));
        // A profile that is not primary limits nothing.
        assert_eq!(names(&rt(None, Some(&[]))).len(), all.len());
        assert!(names(&rt(Some("rev"), Some(&[]))).is_empty());
    }

    #[test]
    fn code_mode_adds_exec_and_with_only_offers_exec_and_task() {
        let mut r = rt(None, None);
        assert!(table(&r, None).lookup("exec").is_none(), "off by default");
        r.settings.code_mode.enabled = true;
        let t = table(&r, None);
        let offered: Vec<&str> = t.specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(offered.last(), Some(&"exec"), "{offered:?}");
        assert!(offered.contains(&"read_file") && offered.contains(&"task"));
        assert_eq!(t.class("exec"), Some(crate::tools::ToolClass::Code));
        let input = serde_json::json!({"code": "a\nb\n"});
        assert_eq!(t.summary("exec", &input), "exec: 2 lines");
        assert!(t
            .specs()
            .last()
            .unwrap()
            .description
            .contains("read_file(input: {"));
        let all = t.all_specs().len();
        r.settings.code_mode.only = true;
        let t = table(&r, None);
        let offered: Vec<&str> = t.specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(offered, ["task", "exec"]);
        assert_eq!(
            t.all_specs().len(),
            all,
            "the others stay reachable from code"
        );
        assert!(!t.is_direct("read_file") && t.lookup("read_file").is_some());
        let reachable = crate::run::cell::reachable(&t);
        assert!(reachable.iter().any(|c| c.name == "shell"));
        assert!(reachable.iter().all(|c| c.name != "exec"));
    }
}
