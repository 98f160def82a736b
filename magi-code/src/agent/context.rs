//! What a turn sends besides its new input: the replayed conversation, the system prompt and
//! the tool list.

use crate::history::{Item, ToolSpec};
use crate::mcp::McpHub;
use crate::runtime::Runtime;
use crate::session::SessionState;
use protocol_core::ErrorCode;

/// The earlier conversation of the attachment, replayed from its stored records
/// (`runner.md` 4); an error when its history cannot be replayed whole (never a silently
/// shortened conversation).
pub fn replay(st: &SessionState) -> Result<Vec<Item>, ErrorCode> {
    match &st.attachment {
        Some(a) => Ok(a.replay()?.to_vec()),
        None => Ok(Vec::new()),
    }
}

/// The system prompt: the runner's base prompt naming the workspace, then the instructions
/// admitted at `initialize` (`runner.md` 3).
#[must_use]
pub fn instructions(rt: &Runtime) -> String {
    let base = format!(
        "You are magi-code, a coding agent. You work in the folder {} on the user's machine, \
         with the user's permissions. Use the tools to read, search, edit and run what the task \
         needs; paths are relative to that folder unless absolute. Keep replies short and say \
         what you changed.",
        rt.cwd.display()
    );
    if rt.instructions.is_empty() {
        base
    } else {
        format!("{base}\n\n{}", rt.instructions)
    }
}

/// The tools offered to the model: the built-ins, then the MCP servers' tools, then the
/// client's (`client.tools`).
#[must_use]
pub fn tools(rt: &Runtime, mcp: Option<&McpHub>) -> Vec<ToolSpec> {
    let mut specs = crate::tools::specs();
    specs.extend(mcp.into_iter().flat_map(McpHub::tools).map(|t| ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        input_schema: t.input_schema.clone(),
    }));
    specs.extend(rt.client_tools.iter().map(|t| ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        input_schema: t.input_schema.clone(),
    }));
    specs
}
