//! Reading what the fake model server was sent (Chat Completions request bodies) and what a
//! child's `history.page` returns.

use super::frames::result;
use super::server::Server;
use serde_json::{json, Value};

/// The `messages` of a Chat request body.
#[track_caller]
pub fn chat_messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

/// The last message of a Chat request body.
#[track_caller]
pub fn last_message(body: &Value) -> &Value {
    chat_messages(body).last().unwrap()
}

/// The last message of a Chat request body, asserted to be a tool result: its call ID and
/// content.
#[track_caller]
pub fn last_tool_result(body: &Value) -> (String, String) {
    let last = last_message(body);
    assert_eq!(last["role"], "tool", "{last}");
    (
        last["tool_call_id"].as_str().unwrap().to_owned(),
        last["content"].as_str().unwrap().to_owned(),
    )
}

/// The first message of a Chat request body, asserted to be the system prompt: its text.
#[track_caller]
pub fn system_prompt(body: &Value) -> String {
    let msgs = chat_messages(body);
    assert_eq!(msgs[0]["role"], "system");
    msgs[0]["content"].as_str().unwrap().to_owned()
}

/// The names of the Chat tools a request body offers (none without `tools`).
pub fn chat_tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The `history.page` entries of the attached session `sid` at `revision`, asked under `id`.
#[track_caller]
pub fn history_entries(s: &mut Server, id: &str, sid: &str, revision: &str) -> Vec<Value> {
    let page = s.call(
        id,
        "history.page",
        &json!({"session_id": sid, "revision": revision}),
    );
    result(&page)["entries"].as_array().unwrap().clone()
}

/// The `kind` of each entry, in order.
#[track_caller]
pub fn entry_kinds(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

/// The entry kinds of [`history_entries`].
#[track_caller]
pub fn history_kinds(s: &mut Server, id: &str, sid: &str, revision: &str) -> Vec<String> {
    entry_kinds(&history_entries(s, id, sid, revision))
        .into_iter()
        .map(str::to_owned)
        .collect()
}
