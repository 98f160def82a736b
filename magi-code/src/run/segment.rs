//! Assistant segments: the text between tool calls, each with its own message ID, reconciled
//! once finished.

use super::voice::Voice;
use crate::history::room::Entry;
use crate::history::{Body, Record};
use crate::util::redact::Redactor;
use crate::util::text::live_chunks;
use crate::wire::events::MessageReconcileData;
use crate::wire::Event;
use protocol_core::limits::LIVE_CHUNK_BYTES;

/// One assistant segment: text between tool calls, with its own message ID.
#[derive(Debug)]
pub struct Segment {
    /// The live message ID.
    pub id: String,
    /// The redacted text so far: what the deltas carried (decisions.md 35).
    pub text: String,
    /// The next live part number.
    pub part: usize,
    /// Delta text not yet sent: the channel had no room. It rides with the next delta.
    pending: String,
    /// What its text has taken of the session's projection room.
    pub charged: Entry,
    /// Redacts the streamed text, holding back a tail that could still become a secret.
    redactor: Redactor,
    /// Whether any text was streamed (some may still be held back).
    streamed: bool,
}

impl Segment {
    /// A new, empty segment with message ID `id`.
    #[must_use]
    pub fn new(id: String) -> Self {
        Self {
            id,
            text: String::new(),
            part: 0,
            pending: String::new(),
            charged: Entry::default(),
            redactor: Redactor::new(),
            streamed: false,
        }
    }

    /// Whether no text was streamed into this segment yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.streamed
    }

    /// Adds streamed raw `text`: redacted, the part that is decided is held back to coalesce
    /// with what follows until [`Self::flush`] (`local-agent-protocol.md`: deltas may
    /// coalesce); a tail that could still become a secret waits for the next text or
    /// [`Self::end`]. A full chunk goes out at once, waiting a moment for room; if there is
    /// still none it is dropped and the part number skips, so a client sees the gap until
    /// reconciliation.
    pub fn push(&mut self, out: &mut Voice, text: &str) {
        self.streamed |= !text.is_empty();
        let safe = self.redactor.feed(text);
        self.push_safe(out, &safe);
    }

    /// The end of the segment's text: the held-back tail, judged, joins the text and the
    /// next delta, so the deltas concatenate to the reconciled text.
    pub fn end(&mut self, out: &mut Voice) {
        let rest = self.redactor.finish();
        self.push_safe(out, &rest);
    }

    fn push_safe(&mut self, out: &mut Voice, text: &str) {
        self.text.push_str(text);
        for c in live_chunks(text, 1, LIVE_CHUNK_BYTES) {
            if self.pending.len() + c.len() > LIVE_CHUNK_BYTES && !self.pending.is_empty() {
                out.delta(&self.id, self.part, std::mem::take(&mut self.pending), true);
                self.part += 1;
            }
            self.pending.push_str(c);
        }
    }

    /// Sends the held-back text as one delta; if the channel has no room the driver hands it
    /// back ([`Self::refused`]) and it keeps coalescing.
    pub fn flush(&mut self, out: &mut Voice) {
        if !self.pending.is_empty() {
            out.delta(
                &self.id,
                self.part,
                std::mem::take(&mut self.pending),
                false,
            );
            self.part += 1;
        }
    }

    /// The driver found no room for the flushed delta `part` with `text`: it rides with the
    /// next one, under the same part number.
    pub fn refused(&mut self, message_id: &str, part: usize, text: String) {
        if message_id == self.id && self.part == part + 1 {
            self.part = part;
            self.pending.insert_str(0, &text);
        }
    }
}

/// Reconciles a finished segment (authoritative parts), records it, and starts a new one.
pub fn close_segment(out: &mut Voice, seg: &mut Segment, partial: bool, records: &mut Vec<Record>) {
    seg.end(out);
    if seg.text.is_empty() {
        return;
    }
    seg.flush(out);
    let parts = live_chunks(&seg.text, 1, LIVE_CHUNK_BYTES);
    let last = parts.len() - 1;
    for (i, p) in parts.iter().enumerate() {
        let (session_id, run_id) = out.ids();
        out.critical(Event::MessageReconcile(MessageReconcileData {
            session_id,
            run_id,
            message_id: seg.id.clone(),
            part: i as u64,
            text: (*p).to_owned(),
            last_part: i == last,
            partial,
        }));
    }
    records.push(out.record(Body::AssistantMessage {
        run_id: out.run_id.clone(),
        message_id: seg.id.clone(),
        text: Some(seg.text.clone()),
        partial,
    }));
    *seg = Segment::new(out.fresh_id("a-"));
}
