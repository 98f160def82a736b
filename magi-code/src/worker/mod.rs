//! The workers behind the engine: one initialization worker, one session/history worker, and
//! cleanup. Every worker runs on its own thread; a panic is caught at the thread boundary and
//! reported as a safe code.

pub mod ops;
pub mod shared;
pub mod titles;

pub use shared::Shared;

use crate::agent::{self, TurnCtx};
use crate::session::{self, Selection};
use crate::startup::{self, LaunchEnv};
use crate::util::cancel::Cancel;
use crate::util::clock::RealClock;
use crate::wire::common::True;
use crate::wire::results::RecordedResult;
use io_driver::{Backend, EventSink};
use protocol_core::{
    ClientToolDef, ErrorCode, OpOutcome, Request, RequestId, WorkerCommand, WorkerEvent,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How long after cleanup begins MCP servers must be gone: inside the 2,000 ms cleanup wait,
/// with room for the rest of cleanup.
const MCP_TEARDOWN: std::time::Duration =
    std::time::Duration::from_millis(protocol_core::limits::CLEANUP_WAIT_MS - 300);

/// How long cleanup lets running title requests end on their own before cancelling them
/// (well inside the cleanup wait, beside the MCP teardown).
const TITLE_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// The result of an answer that was recorded (`approval.answer`, `client.tool.result`).
fn recorded() -> serde_json::Value {
    crate::wire::body(&RecordedResult { recorded: True })
}

struct Running {
    cancel: Arc<Cancel>,
    handle: JoinHandle<()>,
}

/// The backend that `serve --stdio` runs.
pub struct Workers {
    env: LaunchEnv,
    shared: Arc<Shared>,
    init: Option<Running>,
    op: Option<(RequestId, Running)>,
    /// The turn (admission and run), keyed by its `turn.start` request ID.
    run: Option<(RequestId, Running)>,
    finished: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Workers for a child launched with `env`.
    #[must_use]
    pub fn new(env: LaunchEnv) -> Self {
        Self {
            env,
            shared: Arc::new(Shared::default()),
            init: None,
            op: None,
            run: None,
            finished: Vec::new(),
        }
    }

    fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Option<JoinHandle<()>> {
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(f)
            .ok()
    }

    /// Puts a started worker in its slot. The one it replaces has reported but may still be
    /// returning, so it waits in `finished`, joined once it has ended or at cleanup.
    fn keep(
        slot: &mut Option<(RequestId, Running)>,
        finished: &mut Vec<JoinHandle<()>>,
        id: RequestId,
        running: Running,
    ) {
        if let Some((_, old)) = slot.replace((id, running)) {
            finished.push(old.handle);
        }
        // An ended thread keeps its stack mapped until joined: without this, every
        // `session.create` and turn would leave one behind for the child's whole life.
        let mut i = 0;
        while i < finished.len() {
            if finished[i].is_finished() {
                // The worker caught its own panic, so a join error carries nothing to report.
                let _ = finished.swap_remove(i).join();
            } else {
                i += 1;
            }
        }
    }

    fn start_init(
        &mut self,
        capabilities: Vec<String>,
        client_tools: Vec<ClientToolDef>,
        sink: &EventSink,
    ) {
        let cancel = Arc::new(Cancel::default());
        let (env, shared, c, s) = (
            self.env.clone(),
            self.shared.clone(),
            cancel.clone(),
            sink.clone(),
        );
        let handle = Self::spawn("mc-init", move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                startup::run(&env, &c, &capabilities, &client_tools)
            }));
            let ev = match outcome {
                Ok(Ok(startup::Admitted { runtime, mcp })) => {
                    *shared
                        .mcp
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = mcp.map(Arc::new);
                    // The startup selection is stored once, so every later view and
                    // `selection.set` check sees the revision this readiness reports.
                    let mut st = shared.sessions();
                    st.selection = Some(Selection::startup(&runtime));
                    let view = session::view(&runtime, &st);
                    drop(st);
                    *shared
                        .runtime
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(runtime);
                    WorkerEvent::InitReady { view }
                }
                Ok(Err(f)) => WorkerEvent::InitFailed {
                    code: f.code,
                    provider: f.provider,
                    model: f.model,
                    context_id: f.context_id,
                },
                Err(_) => WorkerEvent::InitFailed {
                    code: ErrorCode::StartupFailed,
                    provider: None,
                    model: None,
                    context_id: None,
                },
            };
            s.send(ev);
        });
        match handle {
            Some(handle) => self.init = Some(Running { cancel, handle }),
            None => {
                sink.reply(WorkerEvent::InitFailed {
                    code: ErrorCode::StartupFailed,
                    provider: None,
                    model: None,
                    context_id: None,
                });
            }
        }
    }

    fn start_op(&mut self, id: RequestId, request: Request, sink: &EventSink) {
        let cancel = Arc::new(Cancel::default());
        let (c, s, shared, rid) = (
            cancel.clone(),
            sink.clone(),
            self.shared.clone(),
            id.clone(),
        );
        let handle = Self::spawn("mc-op", move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| ops::run(&shared, &c, &request)))
                .unwrap_or(Err(ErrorCode::ExecutionFailed));
            let (outcome, view) = match outcome {
                Ok((v, view)) => (OpOutcome::Result(v), view),
                Err(code) => (OpOutcome::Error(code), None),
            };
            s.send(WorkerEvent::OpDone {
                id: rid,
                outcome,
                view,
            });
        });
        match handle {
            Some(handle) => Self::keep(
                &mut self.op,
                &mut self.finished,
                id,
                Running { cancel, handle },
            ),
            None => {
                sink.reply(WorkerEvent::OpDone {
                    id,
                    outcome: OpOutcome::Error(ErrorCode::Busy),
                    view: None,
                });
            }
        }
    }

    fn start_turn(&mut self, id: RequestId, session_id: String, prompt: String, sink: &EventSink) {
        let cancel = Arc::new(Cancel::default());
        let (c, s, shared, rid) = (
            cancel.clone(),
            sink.clone(),
            self.shared.clone(),
            id.clone(),
        );
        let handle = Self::spawn("mc-run", move || {
            let sink2 = s.clone();
            let rid2 = rid.clone();
            let res = catch_unwind(AssertUnwindSafe(|| {
                let Some(rt) = shared.runtime() else {
                    s.send(WorkerEvent::TurnRejected {
                        id: rid.clone(),
                        code: ErrorCode::StartupFailed,
                    });
                    return;
                };
                let ctx = TurnCtx {
                    rt,
                    mcp: shared.mcp(),
                    session: &shared.sessions,
                    approvals: &shared.approvals,
                    client_calls: &shared.client_calls,
                    sink: &s,
                    cancel: &c,
                };
                let rt = ctx.rt.clone();
                agent::run_turn(&ctx, rid, session_id, prompt, |job| {
                    let sh = shared.clone();
                    let id = job.session_id.clone();
                    shared.titles.spawn(&id, move |cancel| {
                        agent::title::run(&job, &rt, &sh.sessions, cancel);
                    });
                });
            }));
            if res.is_err() {
                // A panic before admission rejects the turn; after it the engine's closing
                // deadline bounds the missing terminal.
                sink2.send(WorkerEvent::TurnRejected {
                    id: rid2,
                    code: ErrorCode::ExecutionFailed,
                });
            }
        });
        match handle {
            Some(handle) => Self::keep(
                &mut self.run,
                &mut self.finished,
                id,
                Running { cancel, handle },
            ),
            None => {
                sink.reply(WorkerEvent::TurnRejected {
                    id,
                    code: ErrorCode::Busy,
                });
            }
        }
    }

    fn cleanup(&mut self, sink: &EventSink) {
        let mut handles: Vec<JoinHandle<()>> = std::mem::take(&mut self.finished);
        if let Some(r) = self.init.take() {
            r.cancel.cancel();
            handles.push(r.handle);
        }
        for (_, r) in self.op.take().into_iter().chain(self.run.take()) {
            r.cancel.cancel();
            handles.push(r.handle);
        }
        // Title requests end with the child: a short grace for those already out (an offline
        // title takes microseconds), then cancelled and joined with the rest.
        let titles = self.shared.titles.stop();
        let s = sink.clone();
        let shared = self.shared.clone();
        let mcp_deadline = std::time::Instant::now() + MCP_TEARDOWN;
        let joined = Self::spawn("mc-cleanup", move || {
            // MCP servers stop beside the cancelled workers, not after them: a worker blocked
            // writing to a server that stopped reading is freed when that server dies.
            let mcp = shared
                .mcp()
                .and_then(|hub| Self::spawn("mc-mcp-teardown", move || hub.shutdown(mcp_deadline)));
            let handles =
                handles
                    .into_iter()
                    .chain(titles::after_grace(titles, TITLE_GRACE, &RealClock));
            for h in handles.chain(mcp) {
                let _ = h.join();
            }
            // Leases are released only after every worker stopped.
            let mut st = shared.sessions();
            st.attachment = None;
            drop(st);
            s.send(WorkerEvent::CleanupDone);
        });
        if joined.is_none() {
            // Thread exhaustion: leave resources to process exit rather than block the loop.
            sink.reply(WorkerEvent::CleanupDone);
        }
    }
}

impl Backend for Workers {
    fn handle(&mut self, cmd: WorkerCommand, sink: &EventSink) {
        match cmd {
            WorkerCommand::StartInit {
                capabilities,
                client_tools,
            } => self.start_init(capabilities, client_tools, sink),
            WorkerCommand::CancelStartup => {
                if let Some(r) = &self.init {
                    r.cancel.cancel();
                }
            }
            WorkerCommand::StartOp { id, request } => self.start_op(id, request, sink),
            WorkerCommand::CancelOp { id } => {
                for (op_id, r) in self.op.iter().chain(self.run.iter()) {
                    if *op_id == id {
                        r.cancel.cancel();
                    }
                }
            }
            WorkerCommand::StartTurn {
                id,
                session_id,
                prompt,
            } => self.start_turn(id, session_id, prompt, sink),
            WorkerCommand::CancelRun { .. } => {
                // One run at a time: the engine checked the run ID.
                if let Some((_, r)) = &self.run {
                    r.cancel.cancel();
                }
            }
            WorkerCommand::AnswerApproval {
                id,
                run_id,
                approval_id,
                allow,
            } => {
                let outcome = if self.shared.approvals.answer(&run_id, &approval_id, allow) {
                    OpOutcome::Result(recorded())
                } else {
                    OpOutcome::Error(ErrorCode::StaleApproval)
                };
                sink.reply(WorkerEvent::Reply { id, outcome });
            }
            WorkerCommand::AnswerClientTool {
                id,
                run_id,
                call_id,
                ok,
                output,
            } => {
                let outcome = if self
                    .shared
                    .client_calls
                    .answer(&run_id, &call_id, ok, output)
                {
                    OpOutcome::Result(recorded())
                } else {
                    OpOutcome::Error(ErrorCode::StaleCall)
                };
                sink.reply(WorkerEvent::Reply { id, outcome });
            }
            WorkerCommand::Cleanup => self.cleanup(sink),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that has already ended.
    fn ended() -> Running {
        let handle = std::thread::spawn(|| {});
        while !handle.is_finished() {
            std::thread::yield_now();
        }
        Running {
            cancel: Arc::new(Cancel::default()),
            handle,
        }
    }

    #[test]
    fn replaced_workers_that_ended_are_joined_not_kept() {
        let (mut slot, mut finished) = (None, Vec::new());
        for n in 0..50 {
            Workers::keep(
                &mut slot,
                &mut finished,
                RequestId::new(&format!("q{n}")).unwrap(),
                ended(),
            );
        }
        assert!(finished.is_empty(), "{} kept", finished.len());
        assert!(slot.is_some());
    }

    #[test]
    fn a_replaced_worker_still_running_waits_for_cleanup() {
        let cancel = Arc::new(Cancel::default());
        let c = cancel.clone();
        let handle =
            std::thread::spawn(move || while c.sleep(std::time::Duration::from_secs(60)) {});
        let (mut slot, mut finished) = (None, Vec::new());
        let running = Running {
            cancel: cancel.clone(),
            handle,
        };
        Workers::keep(
            &mut slot,
            &mut finished,
            RequestId::new("q1").unwrap(),
            running,
        );
        Workers::keep(
            &mut slot,
            &mut finished,
            RequestId::new("q2").unwrap(),
            ended(),
        );
        assert_eq!(finished.len(), 1);
        cancel.cancel();
        for h in finished {
            h.join().unwrap();
        }
    }
}
