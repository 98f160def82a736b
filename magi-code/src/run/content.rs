//! The bounds on what one run stores: 8 MiB of assistant text and 512 segments
//! (`local-agent-protocol.md`), per run (`decisions.md` 48: the projection window shows the
//! newest turns that fit, so earlier turns never shrink a run's bounds), and a [`Room`] a
//! caller may set tighter (a released attachment stores nothing). Past them the run ends
//! `content_limit`, its reply kept up to the bound and marked partial.

use super::segment::Segment;
use crate::history::room::{escaped_len, Room, PART_OVERHEAD};
use crate::history::{Body, Record};
use protocol_core::limits::{CARD_BYTES, RUN_CONTENT_BYTES, RUN_CONTENT_SEGMENTS, SUMMARY_BYTES};
use serde_json::Value;

/// Longest activity line besides its summary: the tool name (MCP names included), the state
/// and the separator.
const ACTIVITY_LINE_BYTES: usize = 512;

/// What the run has stored of its bounds so far.
#[derive(Debug)]
pub struct Content {
    /// Assistant text bytes.
    bytes: usize,
    /// Assistant segments.
    segments: usize,
    /// What the session's projection can still take.
    room: Room,
}

/// The fixed summary of the `content_limit` diagnostic for a reply stopped at the bound.
pub const REPLY_STOPPED: &str =
    "the reply reached the bound of what a run stores (8 MiB of text, 512 segments); \
     it is kept up to there, marked partial";
/// The fixed summary when a step's tool calls would not fit the run's room.
pub const CALLS_STOPPED: &str =
    "the turn reached the bound of what it may store; its last tool calls did not run";

impl Content {
    /// The bounds of a run whose session's projection leaves `room` (a subagent's history
    /// is never projected: [`Room::unbounded`]).
    #[must_use]
    pub const fn start(room: Room) -> Self {
        Self {
            bytes: 0,
            segments: 0,
            room,
        }
    }

    /// The room measured again after the run's last append (its earlier steps, a
    /// compaction), exactly: taken where nothing of the run is pending, before a step.
    pub fn refresh(&mut self, room: Room) {
        self.room = room;
    }

    /// The length of the longest prefix of delta `t` that `seg` may keep (whole characters);
    /// less than `t.len()` means the bound is reached.
    pub fn take_text(&mut self, seg: &mut Segment, t: &str) -> usize {
        if seg.is_empty() && self.segments >= RUN_CONTENT_SEGMENTS {
            return 0;
        }
        let mut n = t.len().min(RUN_CONTENT_BYTES - self.bytes);
        while !t.is_char_boundary(n) {
            n -= 1;
        }
        let n = self.room.take(&mut seg.charged, &t[..n]);
        if n > 0 && seg.is_empty() {
            self.segments += 1;
        }
        self.bytes += n;
        n
    }

    /// Whether a whole reasoning summary of `text` fits (then it is charged).
    pub fn take_summary(&mut self, text: &str) -> bool {
        self.room.entry(text.chars().map(escaped_len).sum(), 0)
    }

    /// Whether the entries `calls` may add fit, at their largest: an activity line with its
    /// bounded summary, and a card when `cards` were negotiated.
    #[must_use]
    pub fn calls_fit(&self, calls: &[(String, String, Value)], cards: bool) -> bool {
        let mut room = self.room;
        let card = if cards {
            2 * CARD_BYTES + PART_OVERHEAD
        } else {
            0
        };
        calls
            .iter()
            .all(|_| room.entry(2 * (ACTIVITY_LINE_BYTES + SUMMARY_BYTES), card))
    }

    /// Charges the activity and card entries among a step's `records`, as projected.
    pub fn charge(&mut self, records: &[Record]) {
        for r in records {
            match &r.body {
                Body::Activity {
                    state,
                    name,
                    summary,
                    ..
                } => {
                    let line = format!(
                        "{name}: {} — {}",
                        state.as_str(),
                        summary.as_deref().unwrap_or("")
                    );
                    let _ = self.room.entry(line.chars().map(escaped_len).sum(), 0);
                }
                Body::ToolCard { card, .. } => {
                    let _ = self.room.entry(0, 2 * card.to_string().len());
                }
                _ => {}
            }
        }
    }
}
