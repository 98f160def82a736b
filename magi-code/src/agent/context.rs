//! The provider conversation of a turn: the earlier user and assistant turns of the attachment.

use crate::session::SessionState;
use serde_json::Value;

/// The earlier user/assistant turns (role, text) of the attachment, from its current snapshot.
#[must_use]
pub fn conversation(st: &SessionState) -> Vec<(&'static str, String)> {
    let Some(a) = &st.attachment else {
        return Vec::new();
    };
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut last_id = String::new();
    for e in &a.snapshot.projection.entries {
        let Ok(v) = serde_json::from_str::<Value>(e) else {
            continue;
        };
        let role = match v["kind"].as_str() {
            Some("user") => "user",
            Some("assistant") => "assistant",
            _ => continue,
        };
        let id = v["message_id"].as_str().unwrap_or_default();
        let text = v["text"].as_str().unwrap_or_default();
        match out.last_mut() {
            Some((r, t)) if id == last_id && *r == role => t.push_str(text),
            _ => out.push((role, text.to_owned())),
        }
        last_id = id.to_owned();
    }
    out
}
