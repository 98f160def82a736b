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

/// Arbitrary bytes through the SSE decoder (in two pieces at a split the first byte chooses)
/// and `dec`: never panics, and nothing comes after the stream's end.
pub fn drive(data: &[u8], dec: &mut dyn super::model::StreamDecoder) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut sse = super::sse::SseDecoder::new();
    for piece in [&data[..split], &data[split..]] {
        let Ok(events) = sse.feed(piece) else { return };
        for ev in &events {
            let done = dec.finished();
            match dec.event(ev) {
                Ok(out) => assert!(!done || out.is_empty(), "an event after the end"),
                Err(_) => return,
            }
        }
    }
}

/// What a whole stream decodes to: its events, the error that ended it, whether it finished.
#[cfg(test)]
pub(crate) type Decoded = (
    Vec<super::model::ModelEvent>,
    Option<super::model::DecodeError>,
    bool,
);

/// Decodes `bytes` in one feed with a fresh decoder from `make`.
#[cfg(test)]
pub(crate) fn decode_whole(
    bytes: &[u8],
    make: &dyn Fn() -> Box<dyn super::model::StreamDecoder>,
) -> Decoded {
    decode_pieces(&[bytes], make)
}

/// Decodes `pieces` fed one after another.
#[cfg(test)]
pub(crate) fn decode_pieces(
    pieces: &[&[u8]],
    make: &dyn Fn() -> Box<dyn super::model::StreamDecoder>,
) -> Decoded {
    let mut dec = make();
    let mut sse = super::sse::SseDecoder::new();
    let mut out = Vec::new();
    for p in pieces {
        for ev in sse.feed(p).unwrap() {
            match dec.event(&ev) {
                Ok(evs) => out.extend(evs),
                Err(e) => return (out, Some(e), dec.finished()),
            }
        }
    }
    (out, None, dec.finished())
}

/// Decodes a fixture, checking every two-piece split of its bytes decodes the same.
#[cfg(test)]
pub(crate) fn decode_fixture(
    bytes: &[u8],
    make: &dyn Fn() -> Box<dyn super::model::StreamDecoder>,
) -> Decoded {
    let whole = decode_whole(bytes, make);
    for split in 0..bytes.len() {
        let got = decode_pieces(&[&bytes[..split], &bytes[split..]], make);
        assert_eq!(got, whole, "split at {split}");
    }
    whole
}

/// Event builders the decoders' tests share.
#[cfg(test)]
pub(crate) mod events {
    use super::super::model::{ModelEvent, SseEvent, Usage};
    use serde_json::Value;

    /// A tool call event.
    pub fn call(id: &str, name: &str, input: Value) -> ModelEvent {
        ModelEvent::ToolCall {
            call_id: id.into(),
            name: name.into(),
            input,
        }
    }

    /// A usage event.
    pub fn usage(input: u64, output: u64, cached: Option<u64>) -> ModelEvent {
        ModelEvent::Usage(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        })
    }

    /// An unnamed SSE event whose data is `v`.
    pub fn data(v: &Value) -> SseEvent {
        SseEvent {
            event: None,
            data: v.to_string(),
        }
    }
}
