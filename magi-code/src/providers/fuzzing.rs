//! Entry points of the cargo-fuzz targets over the provider decoders (`fuzz/`): each takes
//! arbitrary bytes and must never panic.

pub use super::anthropic::fuzz as anthropic;
pub use super::openai_chat::fuzz as openai_chat;
pub use super::openai_responses::fuzz as openai_responses;

/// Arbitrary bytes through the SSE decoder, fed in two pieces at a split the input chooses.
pub fn sse(data: &[u8]) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut d = super::sse::SseDecoder::new();
    let _ = d.feed(&data[..split]).and_then(|_| d.feed(&data[split..]));
}
