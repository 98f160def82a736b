//! Assistant segments: the text between tool calls, each with its own message ID, reconciled
//! once finished.

use super::emit::RunOutput;
use crate::history::room::Entry;
use crate::history::{Body, Record};
use crate::util::redact::Redactor;
use crate::util::text::live_chunks;
use crate::wire::events::MessageReconcileData;
use crate::wire::Event;
use protocol_core::limits::LIVE_CHUNK_BYTES;

/// How long a full chunk of coalesced delta text waits for channel room before it is dropped.
const FULL_CHUNK_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// One assistant segment: text between tool calls, with its own message ID.
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
    /// A new, empty segment.
    #[must_use]
    pub fn new() -> Self {
        Self {
            id: format!("a-{}", uuid::Uuid::new_v4().simple()),
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
    pub fn push(&mut self, out: &RunOutput<'_>, text: &str) {
        self.streamed |= !text.is_empty();
        let safe = self.redactor.feed(text);
        self.push_safe(out, &safe);
    }

    /// The end of the segment's text: the held-back tail, judged, joins the text and the
    /// next delta, so the deltas concatenate to the reconciled text.
    pub fn end(&mut self, out: &RunOutput<'_>) {
        let rest = self.redactor.finish();
        self.push_safe(out, &rest);
    }

    fn push_safe(&mut self, out: &RunOutput<'_>, text: &str) {
        self.text.push_str(text);
        for c in live_chunks(text, 1, LIVE_CHUNK_BYTES) {
            if self.pending.len() + c.len() > LIVE_CHUNK_BYTES && !self.pending.is_empty() {
                let _ = out.delta_wait(&self.id, self.part, &self.pending, FULL_CHUNK_WAIT);
                self.pending.clear();
                self.part += 1;
            }
            self.pending.push_str(c);
        }
    }

    /// Sends the held-back text as one delta if the channel has room; otherwise it keeps
    /// coalescing.
    pub fn flush(&mut self, out: &RunOutput<'_>) {
        if !self.pending.is_empty() && out.delta(&self.id, self.part, &self.pending) {
            self.part += 1;
            self.pending.clear();
        }
    }
}

impl Default for Segment {
    fn default() -> Self {
        Self::new()
    }
}

/// Reconciles a finished segment (authoritative parts), records it, and starts a new one.
pub fn close_segment(
    out: &mut RunOutput<'_>,
    seg: &mut Segment,
    partial: bool,
    records: &mut Vec<Record>,
) {
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
    *seg = Segment::new();
}
