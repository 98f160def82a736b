//! What a turn sends besides its new input and the replayed conversation: the system prompt and
//! the tool list.

use crate::history::ToolSpec;
use crate::mcp::McpHub;
use crate::runtime::Runtime;

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

/// The tools offered to the model: the built-ins (`task` last), then the MCP servers' tools,
/// then the client's (`client.tools`).
#[must_use]
pub fn tools(rt: &Runtime, mcp: Option<&McpHub>) -> Vec<ToolSpec> {
    let mut specs = crate::tools::specs();
    specs.push(super::subagent::spec(rt));
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
