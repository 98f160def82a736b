//! Entry points of the cargo-fuzz targets over the provider decoders (`fuzz/`), behind the
//! `testing` feature so the production binary never compiles them: each takes arbitrary bytes
//! and must never panic. Also what the decoders' own tests share.

use super::model::{DecodeError, ModelEvent, StreamDecoder};
use super::sse::{SseDecoder, SseError};
use super::{anthropic, openai_chat, openai_responses};

/// Arbitrary bytes through the SSE decoder, fed in two pieces at a split the input chooses.
pub fn sse(data: &[u8]) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut d = SseDecoder::new();
    let _ = d.feed(&data[..split]).and_then(|_| d.feed(&data[split..]));
}

/// Arbitrary bytes through the SSE decoder and the Anthropic stream decoder, whole and split at
/// a position the first two bytes choose; never panics, and both ways agree.
pub fn anthropic(data: &[u8]) {
    let at = match data {
        [a, b, ..] => usize::from(u16::from_le_bytes([*a, *b])) % (data.len() + 1),
        _ => 0,
    };
    let whole = decode_chunks(&[data]);
    let split = decode_chunks(&[&data[..at], &data[at..]]);
    assert_eq!(
        whole, split,
        "splitting the bytes changed what they decode to"
    );
}

/// Arbitrary bytes as a Chat Completions error body and stream; never panics.
pub fn openai_chat(data: &[u8]) {
    let _ = openai_chat::error_body_is_overflow(data);
    drive(data, &mut openai_chat::Decoder::new());
}

/// Arbitrary bytes as a Responses error body and stream; never panics.
pub fn openai_responses(data: &[u8]) {
    let _ = openai_responses::error_body_is_overflow(data);
    drive(data, &mut openai_responses::Decoder::new());
}

/// What a whole byte stream decodes to: the SSE layer's error, or the model events up to the
/// first decode error, that error, and whether the stream finished.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The bytes are not SSE the decoder accepts.
    Sse(SseError),
    /// The events, the first decode error, and whether `message_stop` arrived.
    Model(Vec<ModelEvent>, Option<DecodeError>, bool),
}

/// Decodes `chunks`, fed one by one, through the Anthropic decoder into an [`Outcome`]
/// (fuzzing and split tests).
#[must_use]
pub fn decode_chunks(chunks: &[&[u8]]) -> Outcome {
    let mut sse = SseDecoder::new();
    let mut dec = anthropic::Decoder::new();
    let mut out = Vec::new();
    let mut err = None;
    for chunk in chunks {
        let evs = match sse.feed(chunk) {
            Ok(evs) => evs,
            Err(e) => return Outcome::Sse(e),
        };
        for ev in &evs {
            if err.is_some() {
                break;
            }
            match dec.event(ev) {
                Ok(mut evs) => out.append(&mut evs),
                Err(e) => err = Some(e),
            }
        }
    }
    Outcome::Model(out, err, dec.finished())
}

/// Arbitrary bytes through the SSE decoder (in two pieces at a split the first byte chooses)
/// and `dec`: never panics, and nothing comes after the stream's end.
fn drive(data: &[u8], dec: &mut dyn StreamDecoder) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut sse = SseDecoder::new();
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
pub(crate) type Decoded = (Vec<ModelEvent>, Option<DecodeError>, bool);

/// Decodes `bytes` in one feed with a fresh decoder from `make`.
#[cfg(test)]
pub(crate) fn decode_whole(bytes: &[u8], make: &dyn Fn() -> Box<dyn StreamDecoder>) -> Decoded {
    decode_pieces(&[bytes], make)
}

/// Decodes `pieces` fed one after another.
#[cfg(test)]
pub(crate) fn decode_pieces(
    pieces: &[&[u8]],
    make: &dyn Fn() -> Box<dyn StreamDecoder>,
) -> Decoded {
    let mut dec = make();
    let mut sse = SseDecoder::new();
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
pub(crate) fn decode_fixture(bytes: &[u8], make: &dyn Fn() -> Box<dyn StreamDecoder>) -> Decoded {
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
            cache_creation_input_tokens: None,
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
