//! Anthropic Messages API stream events (`provider-streams.md` 1) for the fake model server.

use super::fake_llm::Reply;
use serde_json::json;

/// One SSE event: `event:` named by the data's `type`.
pub use super::fake_llm::typed_event as ev;

/// `message_start` reporting `input_tokens` of input.
#[must_use]
pub fn start_with_usage(input_tokens: u64) -> String {
    ev(
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )
}

/// `message_start` reporting 40 input tokens.
#[must_use]
pub fn start() -> String {
    start_with_usage(40)
}

/// `message_delta` with `reason`, then `message_stop`.
#[must_use]
pub fn stop(reason: &str) -> Vec<String> {
    vec![
        ev(
            &json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 12}}),
        ),
        ev(&json!({"type": "message_stop"})),
    ]
}

/// Blocks for a `tool_use` at `index` whose input JSON is split in two fragments.
#[must_use]
pub fn tool_use(index: u64, id: &str, name: &str, input: &str) -> Vec<String> {
    let cut = input.len() / 2;
    vec![
        ev(
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ),
        ev(
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        ev(
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": &input[..cut]}}),
        ),
        ev(
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": &input[cut..]}}),
        ),
        ev(&json!({"type": "content_block_stop", "index": index})),
    ]
}

/// A text block at `index` with one delta.
#[must_use]
pub fn text(index: u64, t: &str) -> Vec<String> {
    vec![
        ev(
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ),
        ev(
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}),
        ),
        ev(&json!({"type": "content_block_stop", "index": index})),
    ]
}

/// A signed `thinking` block at `index`.
#[must_use]
pub fn thinking(index: u64, t: &str, sig: &str) -> Vec<String> {
    vec![
        ev(
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        ev(
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": t}}),
        ),
        ev(
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": sig}}),
        ),
        ev(&json!({"type": "content_block_stop", "index": index})),
    ]
}

/// A whole reply: [`start`], then `parts` in order.
#[must_use]
pub fn reply(parts: Vec<Vec<String>>) -> Reply {
    reply_with_usage(parts, 40)
}

/// [`reply`] whose `message_start` reports `input_tokens`.
#[must_use]
pub fn reply_with_usage(parts: Vec<Vec<String>>, input_tokens: u64) -> Reply {
    let mut chunks = vec![start_with_usage(input_tokens)];
    for p in parts {
        chunks.extend(p);
    }
    Reply::sse(chunks)
}
