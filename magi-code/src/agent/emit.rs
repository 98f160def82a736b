//! What a run needs from the worker ([`TurnCtx`]) and how it speaks: critical and best-effort
//! events, records, and durable appends ([`RunOutput`]).

use super::approvals::Approvals;
use super::client_calls::ClientCalls;
use super::quiet::Quiet;
use crate::history::{ActivityKind, ActivityState, Body, Record};
use crate::run::Finished;
use crate::runtime::Runtime;
use crate::session::{self, Selection, SessionState};
use crate::tools::ToolRegistry;
use crate::util::cancel::Cancel;
use crate::wire::common::True;
use crate::wire::events::{
    self as wire, ActivityData, DiagnosticData, InputPersistedData, MessageDeltaData,
};
use crate::wire::{DiagnosticCode, Event};
use io_driver::EventSink;
use protocol_core::{ErrorCode, WorkerEvent};
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a critical event may wait for room.
pub const CRITICAL_WAIT: Duration =
    Duration::from_millis(protocol_core::limits::CRITICAL_EVENT_WAIT_MS);

/// Whether a run that emitted `used` activities may emit one more.
#[must_use]
pub const fn activity_room(used: usize) -> bool {
    used < protocol_core::limits::RUN_ACTIVITIES
}

/// Everything one turn may touch, handed over by the worker that runs it.
pub struct TurnCtx<'a> {
    /// The admitted runtime.
    pub rt: Runtime,
    /// The connected MCP servers, if any.
    pub mcp: Option<Arc<crate::mcp::McpHub>>,
    /// The session state, shared with the session worker.
    pub session: &'a Mutex<SessionState>,
    /// Approvals of the active run, answered from the protocol loop.
    pub approvals: &'a Approvals,
    /// Pending `client.tools` calls of the active run, answered from the protocol loop.
    pub client_calls: &'a ClientCalls,
    /// Where events go.
    pub sink: &'a EventSink,
    /// Set by `turn.cancel`, shutdown and EOF.
    pub cancel: &'a Cancel,
}

impl TurnCtx<'_> {
    /// The session state, even if a panicking holder poisoned it.
    pub fn state(&self) -> MutexGuard<'_, SessionState> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One admitted run's voice: its IDs, its events and its records.
pub struct RunOutput<'a> {
    /// The turn's context.
    pub ctx: &'a TurnCtx<'a>,
    /// The attached session.
    pub session_id: String,
    /// The run.
    pub run_id: String,
    /// Critical delivery failed: the run ends with `output_unavailable`.
    pub output_lost: bool,
    /// Activities emitted so far (`run_activities` bounds them).
    pub activities: usize,
    /// A call found no room under that bound.
    pub activities_full: bool,
    /// The selection the run's model runs on (a `task` call's subagent starts from it).
    pub selection: Option<Selection>,
    /// A subagent's output: its records go to its own history and the client sees none of
    /// its events but approval requests (which name the parent run).
    pub subagent: Option<Quiet>,
    /// The run's tool table: what it offers and may call, each tool's kind, class, schema
    /// and summary (a subagent's is its own).
    pub tools: Arc<ToolRegistry>,
}

impl<'a> RunOutput<'a> {
    /// The output of run `run_id` of `session_id`.
    #[must_use]
    pub fn new(ctx: &'a TurnCtx<'a>, session_id: String, run_id: String) -> Self {
        Self {
            ctx,
            session_id,
            run_id,
            output_lost: false,
            activities: 0,
            activities_full: false,
            selection: None,
            subagent: None,
            tools: Arc::new(ToolRegistry::empty()),
        }
    }

    /// Whether another activity fits the run's bound (`run_activities`); counts it if so.
    pub fn take_activity(&mut self) -> bool {
        let room = activity_room(self.activities);
        if room {
            self.activities += 1;
        } else {
            self.activities_full = true;
        }
        room
    }

    /// The session and run IDs every run event carries, owned for a `wire::events` value.
    #[must_use]
    pub fn ids(&self) -> (String, String) {
        (self.session_id.clone(), self.run_id.clone())
    }

    /// The `run.finished` data of this run: [`Finished`] with its IDs.
    #[must_use]
    pub fn finished_data(&self, finished: &Finished) -> Value {
        let (session_id, run_id) = self.ids();
        Event::RunFinished(finished.to_data(session_id, run_id)).into_data()
    }

    /// The `activity` event of this run for an activity record's fields.
    #[must_use]
    pub fn activity_event(
        &self,
        activity_id: &str,
        kind: ActivityKind,
        state: ActivityState,
        name: &str,
        summary: &str,
    ) -> Event {
        let (session_id, run_id) = self.ids();
        Event::Activity(ActivityData {
            session_id,
            run_id,
            activity_id: activity_id.to_owned(),
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
        })
    }

    /// Sends an event that must arrive; if it cannot within [`CRITICAL_WAIT`], the run is
    /// cancelled and will end `output_unavailable`.
    pub fn critical(&mut self, event: Event) {
        let approval = matches!(event, Event::ApprovalRequested(_));
        if self.output_lost || (self.subagent.is_some() && !approval) {
            return;
        }
        let ev = WorkerEvent::RunEvent {
            run_id: self.run_id.clone(),
            name: event.name().into(),
            data: event.into_data(),
            critical: true,
        };
        if !self.ctx.sink.send_timeout(ev, CRITICAL_WAIT) {
            self.output_lost = true;
            self.ctx.cancel.cancel();
        }
    }

    /// Sends `input.persisted` (critical): the prompt `message_id` is durable at `revision`.
    pub fn input_persisted(&mut self, message_id: String, revision: String) {
        let (session_id, run_id) = self.ids();
        self.critical(Event::InputPersisted(InputPersistedData {
            session_id,
            run_id,
            message_id,
            durable: True,
            revision,
        }));
    }

    /// Sends a `diagnostic` event (critical): a code and a fixed, sanitized summary.
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

    /// Sends a `message.delta` if there is room; dropped otherwise (reconcile repairs it).
    /// Whether it was sent.
    pub fn delta(&self, message_id: &str, part: usize, text: &str) -> bool {
        if self.subagent.is_some() {
            return true;
        }
        self.ctx
            .sink
            .try_send(self.delta_event(message_id, part, text))
    }

    /// [`Self::delta`], waiting up to `wait` for room: a full chunk of coalesced text is worth
    /// slowing the provider's stream for.
    pub fn delta_wait(&self, message_id: &str, part: usize, text: &str, wait: Duration) -> bool {
        if self.subagent.is_some() {
            return true;
        }
        self.ctx
            .sink
            .send_timeout(self.delta_event(message_id, part, text), wait)
    }

    fn delta_event(&self, message_id: &str, part: usize, text: &str) -> WorkerEvent {
        let (session_id, run_id) = self.ids();
        let event = Event::MessageDelta(MessageDeltaData {
            session_id,
            run_id,
            message_id: message_id.to_owned(),
            part: part as u64,
            text: text.to_owned(),
        });
        WorkerEvent::RunEvent {
            run_id: self.run_id.clone(),
            name: event.name().into(),
            data: event.into_data(),
            critical: false,
        }
    }

    /// A record of this run's session, stamped now.
    #[must_use]
    pub fn record(&self, body: Body) -> Record {
        let session_id = self
            .subagent
            .as_ref()
            .map_or(self.session_id.as_str(), Quiet::id);
        Record::now(session_id, body)
    }

    /// Appends records durably: to the attachment, or to a subagent's own history.
    pub fn append(&self, records: &[Record]) -> Result<(), ErrorCode> {
        if let Some(q) = &self.subagent {
            return q.append(records);
        }
        let mut st = self.ctx.state();
        let a = st.attachment.as_mut().ok_or(ErrorCode::PersistenceFailed)?;
        session::append(&self.ctx.rt, a, records)
    }
}

#[cfg(test)]
mod tests {
    use super::activity_room;
    use protocol_core::limits::RUN_ACTIVITIES;

    #[test]
    fn the_activity_bound_at_its_edge() {
        assert!(activity_room(0));
        assert!(activity_room(RUN_ACTIVITIES - 1), "the 4,096th fits");
        assert!(!activity_room(RUN_ACTIVITIES), "the 4,097th does not");
    }
}
