//! What a run needs from the worker ([`TurnCtx`]) and where the driver sends what the run
//! machine says: critical and best-effort events, durable appends ([`RunOutput`]).

use super::approvals::Approvals;
use super::client_calls::ClientCalls;
use super::quiet::Quiet;
use crate::history::Record;
use crate::run::Finished;
use crate::runtime::Runtime;
use crate::session::{self, Selection, SessionState};
use crate::tools::ToolRegistry;
use crate::util::cancel::Cancel;
use crate::wire::events::MessageDeltaData;
use crate::wire::Event;
use io_driver::EventSink;
use protocol_core::{ErrorCode, WorkerEvent};
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long a critical event may wait for room.
pub const CRITICAL_WAIT: Duration =
    Duration::from_millis(protocol_core::limits::CRITICAL_EVENT_WAIT_MS);

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
    /// The same context, cut short by `cancel` instead (a `task` call of an open cell).
    #[must_use]
    pub fn with_cancel<'b>(&'b self, cancel: &'b Cancel) -> TurnCtx<'b> {
        TurnCtx {
            rt: self.rt.clone(),
            mcp: self.mcp.clone(),
            session: self.session,
            approvals: self.approvals,
            client_calls: self.client_calls,
            sink: self.sink,
            cancel,
        }
    }

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
            selection: None,
            subagent: None,
            tools: Arc::new(ToolRegistry::empty()),
        }
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
