//! Serialized history entries: the bounds of a projection, one entry part's serialization,
//! and the projection window over turns (`decisions.md` 48). Leaf of `projection.rs`, which
//! builds each turn's parts.

use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// Largest text part, raw and escaped.
pub const CHUNK_BYTES: usize = protocol_core::limits::HISTORY_CHUNK_BYTES;
/// Largest serialized projection.
pub const SNAPSHOT_BYTES: usize = protocol_core::limits::HISTORY_SNAPSHOT_BYTES;
/// Most parts in a projection.
pub const SNAPSHOT_PARTS: usize = protocol_core::limits::HISTORY_SNAPSHOT_PARTS;

/// The summary of the derived entry after a turn that never finished durably.
pub const INTERRUPTED_SUMMARY: &str =
    "A turn was interrupted before it finished durably; its reply may be incomplete.";

/// The text of the leading entry when earlier history is left out (`decisions.md` 48).
pub const EARLIER_NOT_SHOWN: &str = "earlier history is not shown";
/// Message ID of the leading entry when earlier history is left out.
const EARLIER_ID: &str = "earlier";
/// Message ID of the trailing entry after an interrupted turn.
const INTERRUPTED_ID: &str = "interrupted";

/// One serialized entry part. The fields are in the order a `Value` object keeps its keys
/// (sorted), so a part re-serialized through a `Value` keeps its bytes.
#[derive(Serialize)]
pub struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<&'a Value>,
    pub kind: &'a str,
    pub last_part: bool,
    pub message_id: &'a str,
    pub part: usize,
    pub partial: bool,
    pub text: &'a str,
}

/// `v` serialized (through `buf`) into a shared string of just its length: projections
/// share every settled part.
pub fn shared<T: Serialize>(buf: &mut Vec<u8>, v: &T) -> Arc<str> {
    buf.clear();
    // Serializing these types into memory cannot fail, and serde_json writes UTF-8.
    let _ = serde_json::to_writer(&mut *buf, v);
    std::str::from_utf8(buf).map_or_else(|_| Arc::from(String::from_utf8_lossy(buf)), Arc::from)
}

/// A derived one-part `diagnostic` entry.
pub fn diagnostic(id: &str, text: &str, partial: bool) -> Arc<str> {
    shared(
        &mut Vec::new(),
        &Part {
            card: None,
            kind: "diagnostic",
            last_part: true,
            message_id: id,
            part: 0,
            partial,
            text,
        },
    )
}

/// One turn's share of a projection: its serialized parts and their bytes (one LF each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnParts {
    /// The parts, oldest first.
    pub parts: Vec<Arc<str>>,
    /// Serialized bytes, one LF per part included.
    pub bytes: usize,
}

/// A projection: serialized entries and completeness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    /// Serialized entry objects, in order (shared with the turns that hold them).
    pub entries: Vec<Arc<str>>,
    /// Whether the projection is complete (nothing left out, no interrupted turn).
    pub complete: bool,
    /// Serialized bytes, one LF per entry included.
    bytes: usize,
}

impl Projection {
    /// Serialized bytes, one LF per entry part included (what the snapshot bound counts).
    #[must_use]
    pub const fn bytes(&self) -> usize {
        self.bytes
    }

    /// The complete projection of a history with nothing in it.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            complete: true,
            ..Self::default()
        }
    }

    fn push(&mut self, p: Arc<str>) {
        self.bytes += p.len() + 1;
        self.entries.push(p);
    }
}

/// The projection window (`decisions.md` 48) over whole `turns`, oldest first: all of them
/// when they fit the snapshot budget and nothing before them was left out (`left_out`: the
/// read window did not reach the file's start); otherwise the leading `diagnostic` entry
/// "earlier history is not shown" and the newest turns that fit after it, or, when not even
/// the newest turn fits, its newest parts that do. `interrupted` adds the trailing partial
/// `diagnostic` entry. Only a projection that shows everything, uninterrupted, is complete.
#[must_use]
pub fn window(turns: &[TurnParts], left_out: bool, interrupted: bool) -> Projection {
    let tail = interrupted.then(|| diagnostic(INTERRUPTED_ID, INTERRUPTED_SUMMARY, true));
    let (tail_bytes, tail_parts) = tail.as_ref().map_or((0, 0), |t| (t.len() + 1, 1));
    let all_bytes: usize = turns.iter().map(|t| t.bytes).sum();
    let all_parts: usize = turns.iter().map(|t| t.parts.len()).sum();
    let mut p = Projection::default();
    let fits_all =
        all_bytes + tail_bytes <= SNAPSHOT_BYTES && all_parts + tail_parts <= SNAPSHOT_PARTS;
    if !left_out && fits_all {
        for t in turns {
            for e in &t.parts {
                p.push(Arc::clone(e));
            }
        }
    } else {
        let lead = diagnostic(EARLIER_ID, EARLIER_NOT_SHOWN, false);
        let room_bytes = SNAPSHOT_BYTES - tail_bytes - (lead.len() + 1);
        let room_parts = SNAPSHOT_PARTS - tail_parts - 1;
        let (mut bytes, mut parts, mut k) = (0, 0, turns.len());
        while k > 0
            && bytes + turns[k - 1].bytes <= room_bytes
            && parts + turns[k - 1].parts.len() <= room_parts
        {
            k -= 1;
            bytes += turns[k].bytes;
            parts += turns[k].parts.len();
        }
        p.push(lead);
        if k == turns.len() {
            // Not even the newest turn fits whole: its newest parts that do.
            if let Some(t) = turns.last() {
                let mut start = t.parts.len();
                while start > 0
                    && bytes + t.parts[start - 1].len() < room_bytes
                    && parts < room_parts
                {
                    start -= 1;
                    bytes += t.parts[start].len() + 1;
                    parts += 1;
                }
                for e in &t.parts[start..] {
                    p.push(Arc::clone(e));
                }
            }
        } else {
            for t in &turns[k..] {
                for e in &t.parts {
                    p.push(Arc::clone(e));
                }
            }
        }
    }
    if let Some(t) = tail {
        p.push(t);
    }
    p.complete = !interrupted && !left_out && fits_all;
    p
}

/// Splits text into parts whose escaped JSON length (and so raw length) is at most
/// [`CHUNK_BYTES`], never inside a UTF-8 sequence.
#[must_use]
pub fn chunk(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = 0usize;
    for (i, c) in text.char_indices() {
        let w = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if escaped + w > CHUNK_BYTES {
            parts.push(&text[start..i]);
            start = i;
            escaped = 0;
        }
        escaped += w;
    }
    parts.push(&text[start..]);
    parts
}
