//! The built-in tools of `backend.md` "Tools and approvals", with the inputs of decision 17:
//! exact input validation, bounded reads and output, atomic edits, and a shell whose timeout or
//! cancellation kills its whole process group. Tool access is not an OS sandbox: absolute paths
//! are allowed and the shell runs with the backend's own rights.

mod apply;
mod diff;
mod glob;
mod grep;
mod input;
mod patch;
mod propose;
mod read;
mod schema;
mod shell;
mod walk;
mod write;

pub use propose::{diff_event, propose, Proposal};
pub use schema::specs;

use crate::tools::outcome::{one_line, ToolClass, ToolOutcome};
use crate::util::cancel::Cancel;
use input::{
    invalid, parse, ApplyPatchIn, EditFileIn, GlobIn, GrepIn, ListDirIn, ReadFileIn, ShellIn,
    WriteFileIn,
};
use serde_json::Value;
use std::path::Path;

/// One of the six built-in tools: the run dispatches on this, never on a name string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `read_file`.
    ReadFile,
    /// `list_dir`.
    ListDir,
    /// `grep`.
    Grep,
    /// `glob`.
    Glob,
    /// `write_file`.
    WriteFile,
    /// `edit_file`.
    EditFile,
    /// `apply_patch`.
    ApplyPatch,
    /// `shell`.
    Shell,
}

impl Builtin {
    /// Every built-in, in offer order (the order of [`specs`]).
    pub const ALL: [Self; 8] = [
        Self::ReadFile,
        Self::ListDir,
        Self::Grep,
        Self::Glob,
        Self::WriteFile,
        Self::EditFile,
        Self::ApplyPatch,
        Self::Shell,
    ];

    /// The name the model calls it by.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::ReadFile => "read_file",
            Self::ListDir => "list_dir",
            Self::Grep => "grep",
            Self::Glob => "glob",
            Self::WriteFile => "write_file",
            Self::EditFile => "edit_file",
            Self::ApplyPatch => "apply_patch",
            Self::Shell => "shell",
        }
    }

    /// The built-in called `name`, None for any other name.
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Its policy class: `read_file`, `list_dir`, `grep`, `glob` → Read; `write_file`,
    /// `edit_file`, `apply_patch` → Write; `shell` → Shell.
    #[must_use]
    pub const fn class(self) -> ToolClass {
        match self {
            Self::ReadFile | Self::ListDir | Self::Grep | Self::Glob => ToolClass::Read,
            Self::WriteFile | Self::EditFile | Self::ApplyPatch => ToolClass::Write,
            Self::Shell => ToolClass::Shell,
        }
    }
}

/// The class of a built-in tool name, None for other names.
#[must_use]
pub fn class(name: &str) -> Option<ToolClass> {
    Builtin::named(name).map(Builtin::class)
}

/// The files an `apply_patch` input changes, in patch order (none when it does not parse).
#[must_use]
pub fn patch_files(input: &Value) -> Vec<String> {
    parse::<ApplyPatchIn>(input)
        .ok()
        .and_then(|i| patch::parse(&i.patch).ok())
        .map(|ops| ops.iter().map(|o| o.path().to_owned()).collect())
        .unwrap_or_default()
}

/// A short, safe, one-line description of a call for activity/approval summaries, e.g.
/// `read_file src/lib.rs`, `shell: cargo test`; at most 1024 UTF-8 bytes, sanitized, never
/// file contents or tool output.
#[must_use]
pub fn describe(tool: Builtin, input: &Value) -> String {
    let text = match tool {
        Builtin::ReadFile => parse::<ReadFileIn>(input)
            .ok()
            .map(|i| format!("read_file {}", i.path)),
        Builtin::ListDir => parse::<ListDirIn>(input)
            .ok()
            .map(|i| format!("list_dir {}", i.path)),
        Builtin::Grep => parse::<GrepIn>(input)
            .ok()
            .map(|i| format!("grep {} in {}", i.pattern, i.path.as_deref().unwrap_or("."))),
        Builtin::Glob => parse::<GlobIn>(input)
            .ok()
            .map(|i| format!("glob {} in {}", i.pattern, i.path.as_deref().unwrap_or("."))),
        Builtin::WriteFile => parse::<WriteFileIn>(input)
            .ok()
            .map(|i| format!("write_file {} ({} bytes)", i.path, i.content.len())),
        Builtin::EditFile => parse::<EditFileIn>(input)
            .ok()
            .map(|i| format!("edit_file {}", i.path)),
        Builtin::ApplyPatch => parse::<ApplyPatchIn>(input)
            .ok()
            .and_then(|i| apply::describe(&i.patch)),
        Builtin::Shell => parse::<ShellIn>(input)
            .ok()
            .map(|i| format!("shell: {}", i.command)),
    };
    one_line(&text.unwrap_or_else(|| format!("{} (invalid input)", tool.name())))
}

/// Runs a built-in tool with paths resolved against `cwd`. Never panics; every failure is
/// `ok: false` with a safe summary (a fixed phrase such as "not found", never OS error text).
/// The input is parsed exactly again here (decision 17), whatever checked it before.
#[must_use]
pub fn run(tool: Builtin, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    if cancel.is_cancelled() {
        return ToolOutcome::fail("cancelled");
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_tool(tool, input, cwd, cancel)
    }))
    .unwrap_or_else(|_| ToolOutcome::fail("internal error"))
}

/// Whether `input` parses as `tool`'s exact input (decision 17), without running it: what
/// the schema check cannot see, such as an integer past `u64`, which a float spells.
#[must_use]
pub fn parses(tool: Builtin, input: &Value) -> bool {
    match tool {
        Builtin::ReadFile => parse::<ReadFileIn>(input).is_ok(),
        Builtin::ListDir => parse::<ListDirIn>(input).is_ok(),
        Builtin::Grep => parse::<GrepIn>(input).is_ok(),
        Builtin::Glob => parse::<GlobIn>(input).is_ok(),
        Builtin::WriteFile => parse::<WriteFileIn>(input).is_ok(),
        Builtin::EditFile => parse::<EditFileIn>(input).is_ok(),
        Builtin::ApplyPatch => parse::<ApplyPatchIn>(input).is_ok(),
        Builtin::Shell => parse::<ShellIn>(input).is_ok(),
    }
}

/// [`run`] by name, for tests (None: not a built-in).
#[cfg(test)]
pub(crate) fn run_named(name: &str, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    Builtin::named(name).map_or_else(
        || ToolOutcome::fail("unknown tool"),
        |b| run(b, input, cwd, cancel),
    )
}

fn run_tool(tool: Builtin, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let result = match tool {
        Builtin::ReadFile => parse(input).map(|i| read::read_file(i, cwd)),
        Builtin::ListDir => parse(input).map(|i| read::list_dir(i, cwd, cancel)),
        Builtin::Grep => parse(input).map(|i| grep::grep(i, cwd, cancel)),
        Builtin::Glob => parse(input).map(|i| glob::glob(i, cwd, cancel)),
        Builtin::WriteFile => parse(input).map(|i| write::write_file(i, cwd)),
        Builtin::EditFile => parse(input).map(|i| write::edit_file(i, cwd)),
        Builtin::ApplyPatch => parse(input).map(|i| apply::apply_patch(i, cwd)),
        Builtin::Shell => parse(input).map(|i| shell::shell(i, cwd, cancel)),
    };
    result.unwrap_or_else(|e| invalid(&e))
}

#[cfg(test)]
mod apply_tests;
#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;
