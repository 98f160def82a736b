//! A turn's call of an MCP server's tool, as the run's tool end.

use crate::mcp::{Lost, McpHub};
use crate::run::ToolEnd;
use crate::tools::outcome::bound_output;
use crate::tools::{self, ToolOutcome};
use crate::util::cancel::Cancel;

/// Calls an MCP tool through the hub; a server found gone is reported with the outcome.
pub fn call_mcp(hub: &McpHub, name: &str, input: &serde_json::Value, cancel: &Cancel) -> ToolEnd {
    let done = hub.call(name, input, cancel);
    let summary = match (done.result.ok, done.lost) {
        (true, _) => "ok",
        (false, Some(Lost::Exited)) => "server exited",
        (false, Some(Lost::Failed)) => "server failed",
        (false, Some(Lost::AuthRequired)) => "auth required",
        (false, None) => "error",
    };
    ToolEnd {
        outcome: Some(ToolOutcome {
            ok: done.result.ok,
            summary: summary.to_owned(),
            output: bound_output(done.result.text, false),
            details: tools::ToolDetails::None,
        }),
        lost: done.lost,
    }
}
