//! The provider conversation of a turn: the earlier user and assistant turns of the attachment,
//! from its replay of stored records (`runner.md` 4), never from the display projection.

use crate::history::Item;
use crate::session::SessionState;
use protocol_core::ErrorCode;

/// The earlier user/assistant turns (role, text) of the attachment; an error when its history
/// cannot be replayed whole (never a silently shortened conversation).
pub fn conversation(st: &SessionState) -> Result<Vec<(&'static str, String)>, ErrorCode> {
    let Some(a) = &st.attachment else {
        return Ok(Vec::new());
    };
    Ok(a.replay()?
        .iter()
        .filter_map(|item| match item {
            Item::User { text } => Some(("user", text.clone())),
            Item::Assistant { text } => Some(("assistant", text.clone())),
            _ => None,
        })
        .collect())
}
