//! The OpenAI Responses API (the built-in `openai` provider, and configured providers with `wire_api: "responses"`): the request body built from a [`ModelRequest`](super::model::ModelRequest) and a
//! sans-IO decoder of its stream into [`ModelEvent`](super::model::ModelEvent)s.

/// Fuzz entry: arbitrary bytes through the SSE decoder and this API's stream decoder; never
/// panics.
pub fn fuzz(data: &[u8]) {
    let _ = data;
}
