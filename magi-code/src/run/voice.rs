//! How a run speaks without doing I/O: the events, deltas and records it queues for its
//! driver, the run's IDs, and the fresh IDs it names its messages, activities and asks with.

use super::io::Output;
use crate::history::{ActivityKind, ActivityState, Body, Record};
use crate::wire::events::{self as wire, ActivityData, DiagnosticData, MessageDeltaData};
use crate::wire::{DiagnosticCode, Event};
use std::collections::VecDeque;

/// The placeholder stamp of a record the machine builds: the driver stamps it when it
/// appends (the machine reads no clock). Its length equals a real stamp's, so what the
/// compaction estimate counts of a record does not change with the stamp.
pub const UNSTAMPED: &str = "1970-01-01T00:00:00.000Z";

/// The run's voice: its IDs and the outputs it queued.
#[derive(Debug)]
pub struct Voice {
    /// The session every event names (a subagent's are its parent's).
    pub session_id: String,
    /// The run every event names.
    pub run_id: String,
    /// The session ID the records carry (a subagent's own).
    pub record_session: String,
    /// A subagent's voice: the client sees none of its events but approval requests.
    pub quiet: bool,
    /// Critical delivery failed: no event goes out any more.
    pub output_lost: bool,
    /// What the driver has yet to do.
    pub queue: VecDeque<Output>,
    seed: u128,
    issued: u128,
}

impl Voice {
    /// The voice of run `run_id` of `session_id`; `seed` makes its fresh IDs unique.
    #[must_use]
    pub fn new(session_id: String, run_id: String, record_session: String, seed: u128) -> Self {
        Self {
            session_id,
            run_id,
            record_session,
            quiet: false,
            output_lost: false,
            queue: VecDeque::new(),
            seed,
            issued: 0,
        }
    }

    /// A fresh version-4 shaped UUID: the seed and a counter, so a replay of the same inputs
    /// names the same things.
    pub fn fresh(&mut self) -> uuid::Uuid {
        self.issued += 1;
        let bytes = self
            .seed
            .wrapping_add(
                self.issued
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
            )
            .to_le_bytes();
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// A fresh ID with `prefix` (`a-` for messages, `t-` tools, `c-` compactions, `u-` inputs).
    pub fn fresh_id(&mut self, prefix: &str) -> String {
        format!("{prefix}{}", self.fresh().simple())
    }

    /// The session and run IDs every run event carries.
    #[must_use]
    pub fn ids(&self) -> (String, String) {
        (self.session_id.clone(), self.run_id.clone())
    }

    /// Queues an event that must arrive (the driver ends the run `output_unavailable` if it
    /// cannot deliver it); a subagent sends only approval requests.
    pub fn critical(&mut self, event: Event) {
        let approval = matches!(event, Event::ApprovalRequested(_));
        if self.output_lost || (self.quiet && !approval) {
            return;
        }
        self.queue.push_back(Output::Event(event));
    }

    /// Queues a best-effort `message.delta`; `full` is a whole coalesced chunk (worth a short
    /// wait for room; dropped if there is none, the reconcile repairs it).
    pub fn delta(&mut self, message_id: &str, part: usize, text: String, full: bool) {
        if self.output_lost || self.quiet {
            return;
        }
        let (session_id, run_id) = self.ids();
        self.queue.push_back(Output::Delta {
            data: MessageDeltaData {
                session_id,
                run_id,
                message_id: message_id.to_owned(),
                part: part as u64,
                text,
            },
            full,
        });
    }

    /// Queues a `diagnostic` event: a code and a fixed, sanitized, bounded summary.
    pub fn diagnostic(&mut self, code: DiagnosticCode, summary: &str) {
        let summary = crate::util::text::bounded(
            &crate::util::redact::sanitize_text(summary),
            protocol_core::limits::SUMMARY_BYTES,
        );
        let (session_id, run_id) = self.ids();
        self.critical(Event::Diagnostic(DiagnosticData {
            session_id,
            run_id,
            code: code.as_str().to_owned(),
            summary,
        }));
    }

    /// A record of this run's history, stamped by the driver when appended.
    #[must_use]
    pub fn record(&self, body: Body) -> Record {
        Record {
            session_id: self.record_session.clone(),
            ts: UNSTAMPED.to_owned(),
            cwd: None,
            body,
        }
    }

    /// The `activity` event and its record for one activity state.
    #[must_use]
    pub fn activity(
        &self,
        id: &str,
        kind: ActivityKind,
        state: ActivityState,
        name: &str,
        summary: &str,
    ) -> (Event, Record) {
        let (session_id, run_id) = self.ids();
        let event = Event::Activity(ActivityData {
            session_id,
            run_id: run_id.clone(),
            activity_id: id.to_owned(),
            kind: match kind {
                ActivityKind::Tool => wire::ActivityKind::Tool,
                ActivityKind::Subagent => wire::ActivityKind::Subagent,
                ActivityKind::Compaction => wire::ActivityKind::Compaction,
            },
            state: match state {
                ActivityState::Started => wire::ActivityState::Started,
                ActivityState::Completed => wire::ActivityState::Completed,
                ActivityState::Failed => wire::ActivityState::Failed,
            },
            name: name.to_owned(),
            summary: summary.to_owned(),
        });
        let record = self.record(Body::Activity {
            run_id,
            activity_id: id.to_owned(),
            kind,
            state,
            name: name.to_owned(),
            summary: Some(summary.to_owned()),
        });
        (event, record)
    }
}
