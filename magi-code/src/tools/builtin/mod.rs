//! The six built-in tools of `backend.md` "Tools and approvals", with the inputs of decision 17:
//! exact input validation, bounded reads and output, atomic edits, and a shell whose timeout or
//! cancellation kills its whole process group. Tool access is not an OS sandbox: absolute paths
//! are allowed and the shell runs with the backend's own rights.

mod diff;
mod grep;
mod input;
mod read;
mod schema;
mod shell;
mod write;

pub use schema::specs;

use crate::tools::outcome::{one_line, ToolClass, ToolOutcome};
use crate::util::cancel::Cancel;
use input::{invalid, parse, EditFileIn, GrepIn, ListDirIn, ReadFileIn, ShellIn, WriteFileIn};
use serde_json::Value;
use std::path::Path;

/// The class of a built-in tool name (`read_file`, `list_dir`, `grep` → Read; `write_file`,
/// `edit_file` → Write; `shell` → Shell), None for unknown names.
#[must_use]
pub fn class(name: &str) -> Option<ToolClass> {
    match name {
        "read_file" | "list_dir" | "grep" => Some(ToolClass::Read),
        "write_file" | "edit_file" => Some(ToolClass::Write),
        "shell" => Some(ToolClass::Shell),
        _ => None,
    }
}

/// A short, safe, one-line description of a call for activity/approval summaries, e.g.
/// `read_file src/lib.rs`, `shell: cargo test`; at most 1024 UTF-8 bytes, sanitized, never
/// file contents or tool output.
#[must_use]
pub fn describe(name: &str, input: &Value) -> String {
    let text = match name {
        "read_file" => parse::<ReadFileIn>(input)
            .ok()
            .map(|i| format!("read_file {}", i.path)),
        "list_dir" => parse::<ListDirIn>(input)
            .ok()
            .map(|i| format!("list_dir {}", i.path)),
        "grep" => parse::<GrepIn>(input)
            .ok()
            .map(|i| format!("grep {} in {}", i.pattern, i.path.as_deref().unwrap_or("."))),
        "write_file" => parse::<WriteFileIn>(input)
            .ok()
            .map(|i| format!("write_file {} ({} bytes)", i.path, i.content.len())),
        "edit_file" => parse::<EditFileIn>(input)
            .ok()
            .map(|i| format!("edit_file {}", i.path)),
        "shell" => parse::<ShellIn>(input)
            .ok()
            .map(|i| format!("shell: {}", i.command)),
        _ => return one_line(&format!("unknown tool {name}")),
    };
    one_line(&text.unwrap_or_else(|| format!("{name} (invalid input)")))
}

/// Runs a built-in tool with paths resolved against `cwd`. Never panics; every failure is
/// `ok: false` with a safe summary (a fixed phrase such as "not found", never OS error text).
#[must_use]
pub fn run(name: &str, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    if class(name).is_none() {
        return ToolOutcome::fail("unknown tool");
    }
    if cancel.is_cancelled() {
        return ToolOutcome::fail("cancelled");
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_tool(name, input, cwd, cancel)
    }))
    .unwrap_or_else(|_| ToolOutcome::fail("internal error"))
}

fn run_tool(name: &str, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let result = match name {
        "read_file" => parse(input).map(|i| read::read_file(i, cwd)),
        "list_dir" => parse(input).map(|i| read::list_dir(i, cwd, cancel)),
        "grep" => parse(input).map(|i| grep::grep(i, cwd, cancel)),
        "write_file" => parse(input).map(|i| write::write_file(i, cwd)),
        "edit_file" => parse(input).map(|i| write::edit_file(i, cwd)),
        "shell" => parse(input).map(|i| shell::shell(i, cwd, cancel)),
        _ => return ToolOutcome::fail("unknown tool"),
    };
    result.unwrap_or_else(|e| invalid(&e))
}

#[cfg(test)]
mod grep_tests;
#[cfg(test)]
mod tests;
