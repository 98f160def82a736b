//! One run behind `turn.start`: admission, the turn loop, and `run.finished`. This cut runs
//! the offline `scripted` provider (echo and script steps with tool calls) and streams text
//! from the HTTP providers.

pub mod answers;
pub mod approvals;
pub mod cell;
pub mod client;
pub mod client_calls;
pub mod context;
pub mod drive;
pub mod emit;
pub mod hooks;
pub mod mcp_call;
pub mod params;
pub mod quiet;
pub mod subagent;
pub mod task;
pub mod title;

pub use crate::run::{Finished, Persistence, RunOutcome};
pub use approvals::{Approvals, Decision};
pub use client_calls::ClientCalls;
pub use emit::{RunOutput, TurnCtx, CRITICAL_WAIT};
pub use title::TitleJob;

use crate::session::{self, Selection};
use protocol_core::{ErrorCode, RequestId, WorkerEvent};

/// Admission of a turn: checks, then `TurnAdmitted`; runs it to `RunFinished` on this thread.
/// A title request due after it goes to `start_title`, which makes it beside this worker.
pub fn run_turn(
    ctx: &TurnCtx<'_>,
    id: RequestId,
    session_id: String,
    prompt: String,
    start_title: impl FnOnce(TitleJob),
) {
    let reject = |code| {
        ctx.sink.send(WorkerEvent::TurnRejected {
            id: id.clone(),
            code,
        });
    };
    let (selection, turns, history, cli) = match attached(ctx, &session_id) {
        Ok(a) => a,
        Err(code) => return reject(code),
    };
    let rt = &ctx.rt;
    let selection = selection.unwrap_or_else(|| Selection::startup(rt));
    let mut client = match client::client(
        rt,
        (&selection.provider, &selection.model),
        &prompt,
        Some(turns),
        (&session_id, Some(cli)),
    ) {
        Ok(c) => c,
        Err(code) => return reject(code),
    };
    if ctx.cancel.is_cancelled() {
        return reject(ErrorCode::OperationCancelled);
    }
    let run_id = uuid::Uuid::new_v4().hyphenated().to_string();
    ctx.sink.send(WorkerEvent::TurnAdmitted {
        id: id.clone(),
        run_id: run_id.clone(),
    });
    let mut out = RunOutput::new(ctx, session_id, run_id);
    // Effort controls the cache changed since the selection resolved them fail the turn
    // before its input is persisted; status then shows the new resolution (`decisions.md` 36).
    if let Err(refreshed) = selection.recheck(rt) {
        return refuse_stale(ctx, &out, &selection, refreshed);
    }
    // A `task` call's subagent starts from the turn's selection.
    out.selection = Some(selection.clone());
    // One tool table per run, built from what it offers (`tools::registry`).
    let table = std::sync::Arc::new(context::table(rt, ctx.mcp.as_deref()));
    out.tools = table.clone();
    let instructions = context::instructions(rt, table.specs());
    let effort = selection.effective_effort();
    let params = client::loop_params(
        rt,
        &selection,
        effort.as_deref(),
        &instructions,
        table.specs(),
    );
    // A panic after admission must still end the run with its terminal event, or the engine
    // would keep the run active: report it as a failed run whose persistence is unknown.
    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        drive::execute(&mut out, client.as_mut(), &prompt, history, &params)
    }))
    .unwrap_or(Finished {
        outcome: RunOutcome::Failed,
        persistence: Persistence::Degraded,
        revision: None,
        error_code: Some(ErrorCode::ExecutionFailed),
    });
    // Late answers to this run's approvals are stale from now on.
    ctx.approvals.clear();
    ctx.client_calls.clear();
    let view = Some(session::view(rt, &ctx.state()));
    // The title thread starts before `run.finished` goes out (a thread spawn, never a wait on
    // the request), so a client that shuts down right after it still lets a quick title land
    // within cleanup's grace.
    if let Some(job) = title::due(ctx, &out.session_id, &selection, &finished) {
        start_title(job);
    }
    send_finished(ctx, &out, &finished, view);
}

/// The attached session `session_id`'s selection, turn count, conversation and CLI slot.
type Attached = (
    Option<Selection>,
    usize,
    crate::history::compact::Snapshot,
    crate::providers::claude_proc::CliSlot,
);

/// The attached session's selection, turn count, conversation and CLI slot for a turn of
/// `session_id`; a failed append's dropped state is read back from the file first.
fn attached(ctx: &TurnCtx<'_>, session_id: &str) -> Result<Attached, ErrorCode> {
    let mut guard = ctx.state();
    let st = &mut *guard;
    match st.attachment.as_mut() {
        Some(a) if a.id.as_str() == session_id => {
            session::recover(&ctx.rt, a, ctx.cancel)?;
            let selection = st.selection.clone();
            // The scripted provider never reads the conversation: copy it only for a real
            // one, so an echo turn's cost does not grow with the session.
            let scripted = crate::config::providers::is_offline(
                selection
                    .as_ref()
                    .map_or(ctx.rt.settings.provider.as_str(), |s| s.provider.as_str()),
            );
            let history = if scripted {
                a.history
                    .as_ref()
                    .and_then(|h| h.error())
                    .map_or(Ok(()), |e| Err(ErrorCode::from(e)))?;
                crate::history::compact::Snapshot::default()
            } else {
                session::snapshot(&ctx.rt, a, ctx.cancel)?
            };
            Ok((selection, a.turns, history, a.claude.clone()))
        }
        Some(_) => Err(ErrorCode::StaleSession),
        None => Err(ErrorCode::SessionMissing),
    }
}

/// Effort controls the cache changed since the selection resolved them fail the turn before
/// its input is persisted; status then shows the new resolution (`decisions.md` 36).
fn refuse_stale(
    ctx: &TurnCtx<'_>,
    out: &RunOutput<'_>,
    selection: &Selection,
    refreshed: Selection,
) {
    let view = {
        let mut st = ctx.state();
        if st.selection.as_ref().map(|s| &s.revision) == Some(&selection.revision) {
            st.selection = Some(refreshed);
        }
        Some(session::view(&ctx.rt, &st))
    };
    let finished = Finished {
        outcome: RunOutcome::Failed,
        persistence: Persistence::NotStarted,
        revision: None,
        error_code: Some(ErrorCode::StaleSelection),
    };
    send_finished(ctx, out, &finished, view);
}

/// The run's one terminal event, with the status view after its cleanup.
fn send_finished(
    ctx: &TurnCtx<'_>,
    out: &RunOutput<'_>,
    finished: &Finished,
    view: Option<protocol_core::ReadyView>,
) {
    ctx.sink.send_timeout(
        WorkerEvent::RunFinished {
            run_id: out.run_id.clone(),
            data: out.finished_data(finished),
            view,
        },
        CRITICAL_WAIT,
    );
}
