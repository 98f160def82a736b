//! What a turn sends besides its new input: the replayed conversation, the system prompt and
//! the tool list.

use crate::history::{Item, ToolSpec};
use crate::runtime::Runtime;
use crate::session::SessionState;
use serde_json::Value;

/// The earlier conversation of the attachment.
// Interim: rebuilt from the display projection (user and assistant text only) until replay
// from stored records lands.
#[must_use]
pub fn replay(st: &SessionState) -> Vec<Item> {
    let Some(a) = &st.attachment else {
        return Vec::new();
    };
    let mut out: Vec<Item> = Vec::new();
    let mut last_id = String::new();
    for e in &a.snapshot.projection.entries {
        let Ok(v) = serde_json::from_str::<Value>(e) else {
            continue;
        };
        let user = match v["kind"].as_str() {
            Some("user") => true,
            Some("assistant") => false,
            _ => continue,
        };
        let id = v["message_id"].as_str().unwrap_or_default();
        let text = v["text"].as_str().unwrap_or_default();
        match out.last_mut() {
            Some(Item::User { text: t }) if id == last_id && user => t.push_str(text),
            Some(Item::Assistant { text: t }) if id == last_id && !user => t.push_str(text),
            _ if user => out.push(Item::User {
                text: text.to_owned(),
            }),
            _ => out.push(Item::Assistant {
                text: text.to_owned(),
            }),
        }
        last_id = id.to_owned();
    }
    out
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

/// The tools offered to the model.
#[must_use]
pub fn tools() -> Vec<ToolSpec> {
    crate::tools::specs()
}
