//! The OpenAI Responses API (the built-in `openai` provider, and configured providers with `wire_api: "responses"`): the request body built from a [`ModelRequest`](super::model::ModelRequest) and a
//! sans-IO decoder of its stream into [`ModelEvent`](super::model::ModelEvent)s.

/// Fuzz entry: arbitrary bytes through the SSE decoder and this API's stream decoder; never
/// panics.
pub fn fuzz(data: &[u8]) {
    let _ = data;
}

// Placeholders until the adapter lands (replaced whole by its implementation).
/// Request path under the base URL.
pub const PATH: &str = "/responses";

/// The request body of one step.
#[must_use]
pub fn request_body(req: &super::model::ModelRequest<'_>) -> serde_json::Value {
    serde_json::json!({ "model": req.model, "stream": true })
}

/// Whether an error body names a context overflow.
#[must_use]
pub fn error_body_is_overflow(_body: &[u8]) -> bool {
    false
}

/// The stream decoder.
#[derive(Debug, Default)]
pub struct Decoder {
    done: bool,
}

impl super::model::StreamDecoder for Decoder {
    fn event(
        &mut self,
        _ev: &super::model::SseEvent,
    ) -> Result<Vec<super::model::ModelEvent>, super::model::DecodeError> {
        Err(super::model::DecodeError::Invalid)
    }

    fn finished(&self) -> bool {
        self.done
    }
}
