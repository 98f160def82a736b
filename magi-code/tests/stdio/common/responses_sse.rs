//! OpenAI Responses API stream events (`provider-streams.md` 3) for the fake model server.

use super::fake_llm::Reply;
use serde_json::json;

/// One SSE event: `event:` named by the data's `type`.
pub use super::fake_llm::typed_event as ev;

/// `response.completed` at `seq` reporting `input_tokens` of input (20 of them cached).
#[must_use]
pub fn completed_with_usage(seq: u64, input_tokens: u64) -> String {
    ev(
        &json!({"type": "response.completed", "sequence_number": seq, "response": {"id": "resp_1", "status": "completed", "output": [], "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 20}, "output_tokens": 30, "total_tokens": input_tokens + 30}}}),
    )
}

/// `response.completed` at `seq` reporting 100 input tokens.
#[must_use]
pub fn completed(seq: u64) -> String {
    completed_with_usage(seq, 100)
}

/// A whole reply: one assistant message with `t`, completed with 100 input tokens.
#[must_use]
pub fn text(t: &str) -> Reply {
    text_with_usage(t, 100)
}

/// [`text`] whose `response.completed` reports `input_tokens`.
#[must_use]
pub fn text_with_usage(t: &str, input_tokens: u64) -> Reply {
    Reply::sse(vec![
        ev(
            &json!({"type": "response.output_item.added", "sequence_number": 0, "output_index": 0, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        ),
        ev(
            &json!({"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": t}),
        ),
        ev(
            &json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": t}]}}),
        ),
        completed_with_usage(3, input_tokens),
    ])
}
