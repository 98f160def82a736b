//! What ACP shows of the backend, sans IO: a prompt's content blocks joined into one prompt,
//! tool activities and cards as `tool_call`s, a saved conversation as the `session/update`s
//! that replay it, and a run's end as a stop reason (or the words of its failure).

use crate::client::words::said;
use crate::wire::results::{EntryKind, HistoryEntry};
use serde_json::{json, Value};
use std::path::Path;

/// The protocol's prompt bound: a longer joined prompt is refused, never cut.
pub const PROMPT_BYTES: usize = protocol_core::limits::PROMPT_BYTES;

/// Why a prompt cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptError {
    /// Not an array of content blocks, or nothing to send.
    Invalid,
    /// An image, audio or binary block (the capabilities say none is taken).
    Unsupported,
    /// Over [`PROMPT_BYTES`] once joined.
    TooLong,
}

impl PromptError {
    /// The error message, in words.
    #[must_use]
    pub fn message(self) -> &'static str {
        match self {
            Self::Invalid => "the prompt must be a non-empty array of text or resource blocks",
            Self::Unsupported => "images, audio and binary resources are not supported",
            Self::TooLong => {
                "the prompt is over 16,384 bytes once joined: shorten it or attach less"
            }
        }
    }
}

/// The prompt's blocks as one text: text blocks as they are, a resource link as its name and
/// URI, an embedded text resource as its URI and text; blocks joined by a blank line.
pub fn prompt_text(prompt: &Value) -> Result<String, PromptError> {
    let blocks = prompt.as_array().ok_or(PromptError::Invalid)?;
    let mut parts = Vec::with_capacity(blocks.len());
    for b in blocks {
        let s = |k: &str| b[k].as_str();
        let part = match s("type") {
            Some("text") => s("text").ok_or(PromptError::Invalid)?.to_owned(),
            Some("resource_link") => {
                let uri = s("uri").ok_or(PromptError::Invalid)?;
                format!("{} <{uri}>", s("name").unwrap_or(uri))
            }
            Some("resource") => {
                let r = &b["resource"];
                let uri = r["uri"].as_str().ok_or(PromptError::Invalid)?;
                let text = r["text"].as_str().ok_or(PromptError::Unsupported)?;
                format!("{uri}:\n```\n{text}\n```")
            }
            Some("image" | "audio") => return Err(PromptError::Unsupported),
            _ => return Err(PromptError::Invalid),
        };
        parts.push(part);
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() {
        return Err(PromptError::Invalid);
    }
    if text.len() > PROMPT_BYTES {
        return Err(PromptError::TooLong);
    }
    Ok(text)
}

/// A wire enum's spelling (`completed`, `started` …).
#[must_use]
pub fn word(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The ACP tool kind of a call of tool `name`.
#[must_use]
pub fn tool_kind(name: &str) -> &'static str {
    match name {
        "read_file" | "list_dir" => "read",
        "write_file" | "edit_file" | "apply_patch" => "edit",
        "grep" | "glob" => "search",
        "shell" | "exec" => "execute",
        "task" => "think",
        _ => "other",
    }
}

/// The ACP tool kind of a `tool.cards` card kind (a saved conversation has cards, not names).
#[must_use]
pub fn card_kind(kind: &str) -> &'static str {
    match kind {
        "command" => "execute",
        "file_read" => "read",
        "file_edit" => "edit",
        "search" => "search",
        "subagent" => "think",
        _ => "other",
    }
}

/// A card's path as an ACP location (absolute: the card's is relative to `cwd`).
#[must_use]
pub fn locations(card: &Value, cwd: &Path) -> Option<Value> {
    let path = card["path"].as_str().filter(|p| !p.is_empty())?;
    let abs = cwd.join(path);
    Some(json!([{ "path": abs.to_string_lossy() }]))
}

/// A text chunk of `kind` (`agent_message_chunk`, `user_message_chunk`, `agent_thought_chunk`).
#[must_use]
pub fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// A new tool call.
#[must_use]
pub fn tool_call(id: &str, title: &str, kind: &str, status: &str) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": title, "kind": kind, "status": status})
}

/// An update of tool call `id` with the members of `fields`.
#[must_use]
pub fn tool_update(id: &str, fields: Value) -> Value {
    let mut v = json!({"sessionUpdate": "tool_call_update", "toolCallId": id});
    if let (Some(m), Value::Object(f)) = (v.as_object_mut(), fields) {
        m.extend(f);
    }
    v
}

/// Tool call content: one text block.
#[must_use]
pub fn text_content(text: &str) -> Value {
    json!([{ "type": "content", "content": { "type": "text", "text": text } }])
}

/// How a run ended, as ACP says it: `Ok(stop reason)`, or `Err(message)` for a failure
/// (`step_limit` is set when the run's `step_limit` diagnostic came).
pub fn stop_reason(
    outcome: &str,
    error_code: Option<&str>,
    step_limit: bool,
) -> Result<&'static str, String> {
    match outcome {
        "completed" => Ok("end_turn"),
        "cancelled" => Ok("cancelled"),
        _ if step_limit => Ok("max_turn_requests"),
        _ => Err(format!(
            "the turn failed: {}",
            said(error_code.unwrap_or("execution_failed"))
        )),
    }
}

/// The `session/update`s that replay a saved conversation's entries, in order: prompts as
/// user chunks, replies as agent chunks, reasoning summaries as thought chunks, each tool as
/// one `tool_call` in its final state (from its card, when one follows).
#[must_use]
pub fn replay(entries: &[HistoryEntry], cwd: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    // The tool whose card may follow: its ID, title and whether it only started.
    let mut pending: Option<(String, String, bool)> = None;
    let flush = |p: Option<(String, String, bool)>, out: &mut Vec<Value>| {
        if let Some((id, title, partial)) = p {
            let status = if partial { "failed" } else { "completed" };
            out.push(tool_call(&id, &title, "other", status));
        }
    };
    for e in entries {
        if e.kind == EntryKind::ToolCard {
            let card = e
                .card
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok())
                .unwrap_or_default();
            let Some((id, title, _)) = pending.take() else {
                continue;
            };
            let status = match card["status"].as_str() {
                Some("failed") => "failed",
                Some("running") => "failed",
                _ => "completed",
            };
            let kind = card_kind(card["kind"].as_str().unwrap_or_default());
            let mut call = tool_call(&id, &title, kind, status);
            if let Some(l) = locations(&card, cwd) {
                call["locations"] = l;
            }
            out.push(call);
            continue;
        }
        flush(pending.take(), &mut out);
        match e.kind {
            EntryKind::User => out.push(chunk("user_message_chunk", &e.text)),
            EntryKind::Assistant => out.push(chunk("agent_message_chunk", &e.text)),
            EntryKind::ReasoningSummary => out.push(chunk("agent_thought_chunk", &e.text)),
            EntryKind::Activity => {
                pending = Some((e.message_id.clone(), e.text.clone(), e.partial))
            }
            _ => {}
        }
    }
    flush(pending, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_joins_text_and_resources_and_refuses_past_the_bound() {
        let p = json!([
            {"type": "text", "text": "Fix this:"},
            {"type": "resource", "resource": {"uri": "file:///w/a.rs", "text": "fn a() {}"}},
            {"type": "resource_link", "uri": "file:///w/b.rs", "name": "b.rs"}
        ]);
        assert_eq!(
            prompt_text(&p).unwrap(),
            "Fix this:\n\nfile:///w/a.rs:\n```\nfn a() {}\n```\n\nb.rs <file:///w/b.rs>"
        );
        let at = |n: usize| json!([{"type": "text", "text": "x".repeat(n)}]);
        assert_eq!(prompt_text(&at(PROMPT_BYTES)).unwrap().len(), PROMPT_BYTES);
        assert_eq!(
            prompt_text(&at(PROMPT_BYTES + 1)),
            Err(PromptError::TooLong)
        );
        let image = json!([{"type": "image", "data": "", "mimeType": "image/png"}]);
        assert_eq!(prompt_text(&image), Err(PromptError::Unsupported));
        assert_eq!(prompt_text(&json!([])), Err(PromptError::Invalid));
        assert_eq!(prompt_text(&json!("hi")), Err(PromptError::Invalid));
    }

    #[test]
    fn runs_end_as_stop_reasons_or_words() {
        assert_eq!(stop_reason("completed", None, false), Ok("end_turn"));
        assert_eq!(stop_reason("cancelled", None, false), Ok("cancelled"));
        assert_eq!(
            stop_reason("failed", Some("execution_failed"), true),
            Ok("max_turn_requests")
        );
        assert_eq!(
            stop_reason("failed", Some("persistence_failed"), false),
            Err(
                "the turn failed: the session could not be saved to disk (persistence_failed)"
                    .into()
            )
        );
    }

    #[test]
    fn a_saved_conversation_replays_as_updates() {
        let entry = |id: &str, kind: EntryKind, text: &str, partial: bool, card: Option<Value>| {
            HistoryEntry {
                message_id: id.into(),
                kind,
                text: text.into(),
                partial,
                part: 0,
                last_part: true,
                card: card.map(|c| serde_json::from_value(c).unwrap()),
            }
        };
        let card = json!({"kind": "file_edit", "title": "Write a.txt", "status": "completed", "path": "a.txt", "added": 1, "removed": 0});
        let entries = [
            entry("m1", EntryKind::User, "write it", false, None),
            entry("m2", EntryKind::ReasoningSummary, "Planning.", false, None),
            entry("m3", EntryKind::Activity, "write_file a.txt", false, None),
            entry("m4", EntryKind::ToolCard, "Write a.txt", false, Some(card)),
            entry("m5", EntryKind::Activity, "shell ls", true, None),
            entry("m6", EntryKind::Assistant, "Done.", false, None),
        ];
        let updates = replay(&entries, Path::new("/w"));
        assert_eq!(
            updates,
            [
                chunk("user_message_chunk", "write it"),
                chunk("agent_thought_chunk", "Planning."),
                json!({"sessionUpdate": "tool_call", "toolCallId": "m3", "title": "write_file a.txt", "kind": "edit", "status": "completed", "locations": [{"path": "/w/a.txt"}]}),
                tool_call("m5", "shell ls", "other", "failed"),
                chunk("agent_message_chunk", "Done."),
            ]
        );
    }
}
