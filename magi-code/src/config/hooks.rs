//! Hook definitions (`runner.md` 7): `hooks.pre_tool` and `hooks.post_tool` of the global
//! settings only.

/// One configured hook command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Run with `/bin/sh -c` in the cwd.
    pub command: String,
    /// The tools it applies to; `None` = every tool.
    pub tools: Option<Vec<String>>,
}

/// The hooks of the global settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    /// Run before a call that policy and approval let run.
    pub pre_tool: Vec<Hook>,
    /// Run after a call that ran.
    pub post_tool: Vec<Hook>,
}
