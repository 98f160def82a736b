//! Runs one Code Mode cell (`Output::Cell`) on the attached session's helper
//! (`code-mode.md` 4): the nested calls the helper sends together go to the run as
//! `Input::Call`s (all but the last marked `more`, so the machine batches them), and the
//! driver's one drain carries out the machine's outputs (records, approvals, tools, hooks)
//! while the cell stays open and routes its answers and interrupt here; `Input::Tick` goes in
//! every poll so the machine's wall clock and cancellation can interrupt the cell.

use super::emit::TurnCtx;
use crate::codemode::helper::{Answerer, CallRequest, CellEnd, Helper};
use crate::codemode::protocol::{self, CallAnswer, Cell, ToolInfo};
use crate::codemode::text::{CellState, ToolErrorCode};
use crate::run::{CellJob, Input, InterruptReason, Reply, Run};
use crate::util::cancel::{Alarm, Cancel};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

/// The open cell as the driver keeps it: what cuts its work short (`decisions.md` 52: the
/// turn's cancellation, the helper's end of the cell, its CPU time run out or the helper dead,
/// and the cell's clock, each at once, whatever the nested call is doing), and the machine's
/// answers and interrupt the drain routes to it.
pub struct CellWork {
    /// Cancelled by any of the three; the token nested calls run with.
    pub stop: Arc<Cancel>,
    /// Cancelled when the helper ended the cell.
    pub helper_done: Arc<Cancel>,
    /// Rings `stop` at the cell's deadline while work runs (started by the first work).
    pub alarm: Option<Alarm>,
    /// The run was told of the helper's end.
    pub told: bool,
    /// An interrupt the machine asked for, not yet sent.
    pub interrupt: Option<InterruptReason>,
}

/// What a cell needs of the run's driver: its one drain and its waits, re-entered while the
/// cell is open, its inputs, and the open cell it keeps.
pub trait Perform {
    /// Carries out the run's outputs and waits for the client's answers until the run is
    /// idle; the machine's answers and interrupt go to the open cell.
    fn settle(&mut self, run: &mut Run);
    /// Feeds `input` at the driver's time, telling the run of a cancellation first.
    fn feed(&mut self, run: &mut Run, input: Input);
    /// The machine's answer to call `call`, taken.
    fn answer(&mut self, call: u64) -> Option<Reply>;
    /// The open cell, if one is.
    fn cell(&mut self) -> &mut Option<CellWork>;
}

/// Runs `job` to its `Input::CellEnded` on the helper of session `session_id`, starting one
/// if it has none (or a dead one); a helper that survives the cell goes back to the session.
pub fn run(p: &mut dyn Perform, run: &mut Run, job: CellJob, ctx: &TurnCtx<'_>, session_id: &str) {
    let t0 = Instant::now();
    let taken = ctx
        .state()
        .attachment
        .as_mut()
        .filter(|a| a.id.as_str() == session_id)
        .and_then(|a| a.code.take())
        .filter(Helper::is_alive);
    let helper = match taken {
        Some(h) => Ok(h),
        // The secrets rule's environment (provider keys and secret-looking names gone but
        // `shell_env.keep`), as `shell` and hooks get.
        None => Helper::start(&crate::util::env::children_env()),
    };
    let end = match helper {
        Ok(mut h) => {
            let stop = Arc::new(Cancel::default());
            let helper_done = Arc::new(Cancel::default());
            h.on_cell_end(Arc::clone(&helper_done));
            let turn = Arc::clone(&stop);
            let _turn = ctx.cancel.on_cancel(move || turn.cancel());
            let ended = Arc::clone(&stop);
            let _ended = helper_done.on_cancel(move || ended.cancel());
            *p.cell() = Some(CellWork {
                stop,
                helper_done: Arc::clone(&helper_done),
                alarm: None,
                told: false,
                interrupt: None,
            });
            let end = on_helper(p, run, &mut h, job);
            *p.cell() = None;
            if end.helper_alive {
                give_back(ctx, session_id, h);
            }
            end
        }
        Err(e) => CellEnd {
            state: CellState::Failed,
            output: format!("Error: the code helper could not start: {e}"),
            calls: 0,
            helper_alive: false,
        },
    };
    let elapsed_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
    let input = Input::CellEnded {
        state: end.state,
        output: end.output,
        elapsed_ms,
    };
    p.feed(run, input);
}

/// Keeps `h` for the session's next cell; dropped (killed) when the session is gone.
fn give_back(ctx: &TurnCtx<'_>, session_id: &str, h: Helper) {
    let mut st = ctx.state();
    if let Some(a) = st
        .attachment
        .as_mut()
        .filter(|a| a.id.as_str() == session_id)
    {
        a.code = Some(h);
    }
}

/// The open cell: the driver and run, and the calls the helper is still sending together.
struct Open<'p, 'r> {
    p: &'p mut dyn Perform,
    run: &'r mut Run,
    group: Vec<u64>,
    answerer: Answerer,
}

impl Open<'_, '_> {
    /// Hands the call to the run; after the last of the helper's group, settles the run, so
    /// that every call of the group is answered: the last one's answer returned, the others'
    /// given through the answerer (a call the machine left unanswered is cancelled).
    fn call(&mut self, r: CallRequest) -> Option<CallAnswer> {
        let (call, more) = (r.call, r.more);
        let input = Input::Call {
            call,
            name: r.name,
            input: r.input,
            more,
            refused: r.refused.map(|f| (f.code, f.message)),
            id: None,
        };
        self.group.push(call);
        self.p.feed(self.run, input);
        if more {
            return None;
        }
        self.p.settle(self.run);
        let group = std::mem::take(&mut self.group);
        let mut last = None;
        for c in group {
            let result = self
                .p
                .answer(c)
                .unwrap_or_else(|| Err((ToolErrorCode::Cancelled, "cancelled".to_owned())));
            if c == call {
                last = Some(answer(result));
            } else {
                self.answerer.answer(c, answer(result));
            }
        }
        last
    }

    /// Gives the machine the time; its interrupt, once.
    fn poll(&mut self) -> Option<protocol::InterruptReason> {
        self.p.feed(self.run, Input::Tick);
        self.p.settle(self.run);
        let r = self.p.cell().as_mut().and_then(|w| w.interrupt.take())?;
        Some(match r {
            InterruptReason::Timeout => protocol::InterruptReason::Timeout,
            InterruptReason::Cancel => protocol::InterruptReason::Cancel,
        })
    }
}

/// Runs `job` on `h`; the calls the helper sends together are answered as a batch.
fn on_helper(p: &mut dyn Perform, run: &mut Run, h: &mut Helper, job: CellJob) -> CellEnd {
    let cell = Cell {
        id: uuid::Uuid::new_v4().hyphenated().to_string(),
        code: job.code,
        tools: job
            .tools
            .into_iter()
            .map(|t| ToolInfo {
                name: t.name,
                description: t.description,
                declaration: t.declaration,
            })
            .collect(),
        cpu_ms: job.cpu_ms,
        memory_mib: u64::from(job.memory_mib),
        max_calls: job.max_calls,
    };
    let open = RefCell::new(Open {
        p,
        run,
        group: Vec::new(),
        answerer: h.answerer(),
    });
    h.run_cell_deferred(&cell, &mut |r| open.borrow_mut().call(r), &mut || {
        open.borrow_mut().poll()
    })
}

/// The helper's form of the machine's answer.
fn answer(result: Reply) -> CallAnswer {
    match result {
        Ok(text) => CallAnswer::Output(text),
        Err((code, message)) => CallAnswer::Error {
            code,
            message: if message.is_empty() {
                code.as_str().to_owned()
            } else {
                message
            },
        },
    }
}
