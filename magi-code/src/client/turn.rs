//! One run as a client shows it: assistant messages built from best-effort `message.delta`
//! and then REPLACED (never appended to) by the authoritative `message.reconcile` parts once
//! the `last_part` arrives; activity, approvals and the one `run.finished` after which nothing
//! of the run may come. Sans-IO: feed it the run's events in order.

use crate::wire::events::RunFinishedData;
use crate::wire::Event;
use protocol_core::limits;
use std::fmt;

/// A run's events broke the protocol's run rules; the client fails closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnError {
    /// An event of this run after its `run.finished`.
    AfterTerminal,
    /// A reconciliation part out of order (each message's parts run 0, 1, 2 …).
    ReconcileOutOfOrder,
    /// More messages or text than a run may carry (`run_content_segments`,
    /// `run_content_bytes`).
    ContentLimit,
}

impl fmt::Display for TurnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AfterTerminal => "an event after run.finished",
            Self::ReconcileOutOfOrder => "a reconciliation part out of order",
            Self::ContentLimit => "more content than a run carries",
        })
    }
}

/// One assistant message (a segment) of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The run-scoped message ID.
    pub id: String,
    live: String,
    next_delta: u64,
    gap: bool,
    parts: Vec<String>,
    reconciled: Option<String>,
    partial: bool,
}

impl Message {
    /// What to show now: the reconciled text once complete, else the deltas so far.
    #[must_use]
    pub fn text(&self) -> &str {
        self.reconciled.as_deref().unwrap_or(&self.live)
    }

    /// The authoritative text, once every reconciliation part arrived.
    #[must_use]
    pub fn reconciled(&self) -> Option<&str> {
        self.reconciled.as_deref()
    }

    /// Whether what [`text`](Self::text) shows may miss something: a delta part was missed
    /// and no reconciliation replaced it, or the reconciled segment is itself partial.
    #[must_use]
    pub fn incomplete(&self) -> bool {
        match self.reconciled {
            Some(_) => self.partial,
            None => self.gap || !self.parts.is_empty(),
        }
    }
}

/// What one event changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// Live text appended to message `message` (show it; it may be replaced later).
    Delta {
        /// The message ID.
        message: String,
        /// The appended text.
        text: String,
    },
    /// Message `message` is reconciled: `text` replaces `shown`, what its deltas built.
    Reconciled {
        /// The message ID.
        message: String,
        /// The authoritative text.
        text: String,
        /// The live text it replaces.
        shown: String,
        /// Whether the segment is partial.
        partial: bool,
    },
    /// The run finished (its `run.finished` data is [`Turn::finished`]).
    Finished,
    /// Nothing to show: a reconciliation part before the last, a delta after the message was
    /// reconciled, an event of another run, or an event the caller handles itself.
    Other,
}

/// One run: its messages in order of first appearance and its terminal. [`Turn::new`] binds
/// it to a run; `Turn::default()` takes whichever run's events it is given.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    run_id: Option<String>,
    messages: Vec<Message>,
    bytes: usize,
    finished: Option<RunFinishedData>,
}

/// The run an event belongs to (every run event names one).
#[must_use]
pub fn run_of(e: &Event) -> &str {
    match e {
        Event::InputPersisted(d) => &d.run_id,
        Event::MessageDelta(d) => &d.run_id,
        Event::MessageReconcile(d) => &d.run_id,
        Event::Activity(d) => &d.run_id,
        Event::ApprovalRequested(d) => &d.run_id,
        Event::Diagnostic(d) => &d.run_id,
        Event::RunFinished(d) => &d.run_id,
        Event::ToolCard(d) => &d.run_id,
        Event::ClientToolCall(d) => &d.run_id,
        Event::ClientToolCancel(d) => &d.run_id,
        Event::ToolOutput(d) => &d.run_id,
        Event::ToolDiff(d) => &d.run_id,
    }
}

impl Turn {
    /// The turn of run `run_id` (from `turn.start`'s result); events of other runs are
    /// [`Update::Other`].
    #[must_use]
    pub fn new(run_id: &str) -> Self {
        Self {
            run_id: Some(run_id.to_owned()),
            ..Self::default()
        }
    }

    /// The run ID.
    #[must_use]
    pub fn run_id(&self) -> &str {
        self.run_id.as_deref().unwrap_or_default()
    }

    /// The run's messages, in order of first appearance.
    #[must_use]
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Every message's current text, joined in order (the reply once the run finished).
    #[must_use]
    pub fn text(&self) -> String {
        self.messages.iter().map(Message::text).collect()
    }

    /// The `run.finished` data, once it arrived.
    #[must_use]
    pub fn finished(&self) -> Option<&RunFinishedData> {
        self.finished.as_ref()
    }

    fn message(&mut self, id: &str) -> Result<&mut Message, TurnError> {
        let at = match self.messages.iter().position(|m| m.id == id) {
            Some(at) => at,
            None if self.messages.len() >= limits::RUN_CONTENT_SEGMENTS => {
                return Err(TurnError::ContentLimit)
            }
            None => {
                self.messages.push(Message {
                    id: id.to_owned(),
                    ..Message::default()
                });
                self.messages.len() - 1
            }
        };
        Ok(&mut self.messages[at])
    }

    fn count(&mut self, more: usize) -> Result<(), TurnError> {
        // Deltas and the reconciliation each carry at most `run_content_bytes` of a run.
        if self.bytes + more > 2 * limits::RUN_CONTENT_BYTES {
            return Err(TurnError::ContentLimit);
        }
        self.bytes += more;
        Ok(())
    }

    /// Applies one event of the run.
    pub fn apply(&mut self, e: &Event) -> Result<Update, TurnError> {
        if self.run_id.as_deref().is_some_and(|r| r != run_of(e)) {
            return Ok(Update::Other);
        }
        if self.finished.is_some() {
            return Err(TurnError::AfterTerminal);
        }
        match e {
            Event::MessageDelta(d) => {
                self.count(d.text.len())?;
                let m = self.message(&d.message_id)?;
                if m.reconciled.is_some() || !m.parts.is_empty() {
                    return Ok(Update::Other);
                }
                // A skipped part was dropped under pressure: the display is incomplete until
                // reconciliation; a repeated or older part is not appended twice.
                if d.part < m.next_delta {
                    return Ok(Update::Other);
                }
                m.gap |= d.part > m.next_delta;
                m.next_delta = d.part + 1;
                m.live.push_str(&d.text);
                Ok(Update::Delta {
                    message: d.message_id.clone(),
                    text: d.text.clone(),
                })
            }
            Event::MessageReconcile(d) => {
                self.count(d.text.len())?;
                let m = self.message(&d.message_id)?;
                if m.reconciled.is_some() || d.part != m.parts.len() as u64 {
                    return Err(TurnError::ReconcileOutOfOrder);
                }
                m.parts.push(d.text.clone());
                if !d.last_part {
                    return Ok(Update::Other);
                }
                let text: String = std::mem::take(&mut m.parts).concat();
                m.reconciled = Some(text.clone());
                m.partial = d.partial;
                Ok(Update::Reconciled {
                    message: d.message_id.clone(),
                    text,
                    shown: std::mem::take(&mut m.live),
                    partial: d.partial,
                })
            }
            Event::RunFinished(d) => {
                self.finished = Some(d.clone());
                Ok(Update::Finished)
            }
            _ => Ok(Update::Other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::events::{MessageDeltaData, MessageReconcileData, Outcome, Persistence};

    fn delta(m: &str, part: u64, text: &str) -> Event {
        Event::MessageDelta(MessageDeltaData {
            session_id: "s".into(),
            run_id: "r".into(),
            message_id: m.into(),
            part,
            text: text.into(),
        })
    }

    fn reconcile(m: &str, part: u64, text: &str, last_part: bool) -> Event {
        Event::MessageReconcile(MessageReconcileData {
            session_id: "s".into(),
            run_id: "r".into(),
            message_id: m.into(),
            part,
            text: text.into(),
            last_part,
            partial: false,
        })
    }

    fn finished(run: &str) -> Event {
        Event::RunFinished(RunFinishedData {
            session_id: "s".into(),
            run_id: run.into(),
            outcome: Outcome::Completed,
            persistence: Persistence::Durable,
            revision: None,
            error_code: None,
        })
    }

    #[test]
    fn reconciliation_replaces_the_deltas_never_appends() {
        let mut t = Turn::new("r");
        t.apply(&delta("m1", 0, "Hel")).unwrap();
        t.apply(&delta("m1", 1, "lo")).unwrap();
        assert_eq!(t.text(), "Hello");
        let u = t.apply(&reconcile("m1", 0, "Hello", true)).unwrap();
        assert_eq!(
            u,
            Update::Reconciled {
                message: "m1".into(),
                text: "Hello".into(),
                shown: "Hello".into(),
                partial: false
            }
        );
        assert_eq!(t.text(), "Hello", "once, not twice");
        assert!(!t.messages()[0].incomplete());
    }

    #[test]
    fn parts_concatenate_only_at_the_last_part() {
        let mut t = Turn::new("r");
        t.apply(&delta("m1", 0, "draft")).unwrap();
        assert_eq!(
            t.apply(&reconcile("m1", 0, "Fin", false)).unwrap(),
            Update::Other
        );
        assert_eq!(t.text(), "draft", "no half-reconciled text shown as whole");
        assert!(t.messages()[0].incomplete());
        assert_eq!(t.apply(&delta("m1", 1, "ignored")).unwrap(), Update::Other);
        t.apply(&reconcile("m1", 1, "al", true)).unwrap();
        assert_eq!(t.messages()[0].reconciled(), Some("Final"));
        assert_eq!(t.text(), "Final");
    }

    #[test]
    fn a_missed_delta_marks_the_display_incomplete_until_reconciled() {
        let mut t = Turn::new("r");
        t.apply(&delta("m1", 0, "a")).unwrap();
        t.apply(&delta("m1", 2, "c")).unwrap();
        assert_eq!(t.apply(&delta("m1", 2, "c")).unwrap(), Update::Other);
        assert_eq!(t.text(), "ac");
        assert!(t.messages()[0].incomplete());
        t.apply(&reconcile("m1", 0, "abc", true)).unwrap();
        assert_eq!(t.text(), "abc");
        assert!(!t.messages()[0].incomplete());
    }

    #[test]
    fn messages_keep_their_order_and_their_own_parts() {
        let mut t = Turn::new("r");
        t.apply(&delta("m1", 0, "one ")).unwrap();
        t.apply(&reconcile("m1", 0, "One. ", true)).unwrap();
        t.apply(&delta("m2", 0, "two")).unwrap();
        t.apply(&reconcile("m2", 0, "Two.", true)).unwrap();
        // A reconciliation without any delta (all dropped) still shows.
        t.apply(&reconcile("m3", 0, " Three.", true)).unwrap();
        assert_eq!(t.text(), "One. Two. Three.");
        let ids: Vec<&str> = t.messages().iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m1", "m2", "m3"]);
    }

    #[test]
    fn reconciliation_out_of_order_or_twice_fails_closed() {
        let mut t = Turn::new("r");
        assert_eq!(
            t.apply(&reconcile("m1", 1, "x", true)),
            Err(TurnError::ReconcileOutOfOrder)
        );
        t.apply(&reconcile("m2", 0, "x", true)).unwrap();
        assert_eq!(
            t.apply(&reconcile("m2", 0, "x", true)),
            Err(TurnError::ReconcileOutOfOrder)
        );
    }

    #[test]
    fn nothing_of_the_run_after_its_terminal_and_other_runs_pass_by() {
        let mut t = Turn::new("r");
        assert_eq!(t.apply(&finished("other")).unwrap(), Update::Other);
        assert!(t.finished().is_none());
        assert_eq!(t.apply(&finished("r")).unwrap(), Update::Finished);
        assert_eq!(t.finished().unwrap().outcome, Outcome::Completed);
        assert_eq!(
            t.apply(&delta("m1", 0, "late")),
            Err(TurnError::AfterTerminal)
        );
        assert_eq!(t.apply(&finished("r")), Err(TurnError::AfterTerminal));
    }

    #[test]
    fn the_segment_bound_holds_at_its_edge() {
        let mut t = Turn::new("r");
        for i in 0..limits::RUN_CONTENT_SEGMENTS {
            t.apply(&delta(&format!("m{i}"), 0, "x")).unwrap();
        }
        assert_eq!(t.messages().len(), limits::RUN_CONTENT_SEGMENTS);
        assert_eq!(
            t.apply(&delta("one-more", 0, "x")),
            Err(TurnError::ContentLimit)
        );
        // Known messages still take text.
        t.apply(&reconcile("m0", 0, "y", true)).unwrap();
    }

    #[test]
    fn the_content_bound_holds_at_its_edge() {
        let mut t = Turn::new("r");
        let chunk = "x".repeat(limits::LIVE_CHUNK_BYTES);
        let whole = 2 * limits::RUN_CONTENT_BYTES / limits::LIVE_CHUNK_BYTES;
        for part in 0..whole as u64 {
            t.apply(&delta("m", part, &chunk)).unwrap();
        }
        let rest = 2 * limits::RUN_CONTENT_BYTES - whole * limits::LIVE_CHUNK_BYTES;
        t.apply(&delta("m", whole as u64, &"x".repeat(rest)))
            .unwrap();
        assert_eq!(
            t.apply(&delta("m", whole as u64 + 1, "x")),
            Err(TurnError::ContentLimit)
        );
    }
}
