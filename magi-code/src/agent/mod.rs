//! One run behind `turn.start`: admission, the turn loop, and `run.finished`. This cut runs
//! the offline `scripted` provider (echo and script steps with tool calls) and streams text
//! from the HTTP providers.

pub mod approvals;
pub mod context;
pub mod emit;
pub mod outcome;
pub mod segment;
pub mod tool_call;
pub mod turn_loop;

pub use approvals::{Approvals, Decision};
pub use emit::{RunOutput, TurnCtx, CRITICAL_WAIT};
pub use outcome::{Finished, Persistence, RunOutcome};

use crate::providers::{self, load_script, Step};
use crate::session::{self, Selection};
use protocol_core::{ErrorCode, RequestId, WorkerEvent};

/// Admission of a turn: checks, then `TurnAdmitted`; runs it to `RunFinished` on this thread.
pub fn run_turn(ctx: &TurnCtx<'_>, id: RequestId, session_id: String, prompt: String) {
    let reject = |code| {
        ctx.sink.send(WorkerEvent::TurnRejected {
            id: id.clone(),
            code,
        });
    };
    let (selection, turns) = {
        let st = ctx.state();
        match &st.attachment {
            Some(a) if a.id.as_str() == session_id => (st.selection.clone(), a.turns),
            Some(_) => return reject(ErrorCode::StaleSession),
            None => return reject(ErrorCode::SessionMissing),
        }
    };
    let rt = &ctx.rt;
    let selection = selection.unwrap_or_else(|| Selection::startup(rt));
    let mut http = None;
    let steps = match (selection.provider.as_str(), selection.model.as_str()) {
        ("scripted", "echo") => vec![Step::Text(prompt.clone())],
        ("scripted", "script") => {
            let Some(script) = rt.settings.scripted_script.as_deref().and_then(load_script) else {
                return reject(ErrorCode::ExecutionFailed);
            };
            script[turns % script.len()].clone()
        }
        (provider, model) => match providers::target(rt, provider, model) {
            Some(t) => {
                let conversation = context::conversation(&ctx.state());
                match conversation {
                    Ok(c) => http = Some((t, c)),
                    Err(code) => return reject(code),
                }
                Vec::new()
            }
            None => return reject(ErrorCode::ProviderUnavailable),
        },
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
    let echo = selection.provider == "scripted" && selection.model == "echo";
    // A panic after admission must still end the run with its terminal event, or the engine
    // would keep the run active: report it as a failed run whose persistence is unknown.
    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        turn_loop::execute(&mut out, &prompt, &steps, echo, http.as_ref())
    }))
    .unwrap_or(Finished {
        outcome: RunOutcome::Failed,
        persistence: Persistence::Degraded,
        revision: None,
        error_code: Some(ErrorCode::ExecutionFailed),
    });
    // Late answers to this run's approvals are stale from now on.
    ctx.approvals.clear();
    let view = Some(session::view(rt, &ctx.state()));
    ctx.sink.send_timeout(
        WorkerEvent::RunFinished {
            run_id: out.run_id.clone(),
            data: out.data(finished.to_value()),
            view,
        },
        CRITICAL_WAIT,
    );
}
