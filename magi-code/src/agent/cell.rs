//! Runs one Code Mode cell (`Output::Cell`) on the attached session's helper
//! (`code-mode.md` 4): the nested calls the helper sends together go to the run as
//! `Input::CodeCall`s (all but the last marked `more`, so the machine batches them), and the
//! driver carries out the machine's outputs (records, approvals, tools, hooks) while the
//! cell stays open, until the machine has answered them all; `Input::Tick` goes in every
//! poll so the machine's wall clock and cancellation can interrupt the cell.

use super::emit::TurnCtx;
use crate::codemode::helper::{Answerer, CallRequest, CellEnd, Helper};
use crate::codemode::protocol::{self, CallAnswer, Cell, ToolInfo};
use crate::codemode::text::{CellState, ToolErrorCode};
use crate::run::{CellJob, CodeResult, Input, InterruptReason, Output, Run};
use crate::util::cancel::{Alarm, Cancel};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// What cuts the driver's work short while a cell is open (`decisions.md` 52): the turn's
/// cancellation, the helper's end of the cell (its CPU time ran out, or it died) and the
/// cell's clock, each at once, whatever the nested call is doing.
pub struct CellWork {
    /// Cancelled by any of the three; the token nested calls run with.
    pub stop: Arc<Cancel>,
    /// Cancelled when the helper ended the cell.
    pub helper_done: Arc<Cancel>,
    /// Rings `stop` at the cell's deadline while work runs (started by the first work).
    pub alarm: Option<Alarm>,
    /// The run was told of the helper's end.
    pub told: bool,
}

/// What a cell needs of the run's driver: the same handling of outputs, waits and inputs as
/// the run's own loop, re-entered while the cell is open.
pub trait Perform {
    /// Carries out one output of the run (never a step: none comes while a cell is open).
    fn perform(&mut self, run: &mut Run, o: Output);
    /// Blocks on what the run waits for; false when it waits for nothing.
    fn wait(&mut self, run: &mut Run) -> bool;
    /// Feeds `input` at the driver's time, telling the run of a cancellation first.
    fn feed(&mut self, run: &mut Run, input: Input);
    /// Opens (`Some`) or closes the cell whose work `w` cuts short.
    fn cell_work(&mut self, w: Option<CellWork>);
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
            p.cell_work(Some(CellWork {
                stop,
                helper_done: Arc::clone(&helper_done),
                alarm: None,
                told: false,
            }));
            let end = on_helper(p, run, &mut h, job);
            p.cell_work(None);
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

/// The open cell: the driver and run, the machine's answers not yet given to the helper,
/// an interrupt it asked for, and the calls the helper is still sending together.
struct Open<'p, 'r> {
    p: &'p mut dyn Perform,
    run: &'r mut Run,
    answers: HashMap<u64, CodeResult>,
    interrupt: Option<InterruptReason>,
    group: Vec<u64>,
    answerer: Answerer,
}

impl Open<'_, '_> {
    /// Carries out every pending output, keeping answers and the interrupt for the helper.
    fn drain(&mut self) {
        while let Some(o) = self.run.poll_output() {
            match o {
                Output::CodeAnswer { call, result } => {
                    self.answers.insert(call, result);
                }
                Output::Interrupt(r) => self.interrupt = Some(r),
                o => self.p.perform(self.run, o),
            }
        }
    }

    /// Hands the call to the run; after the last of the helper's group, carries out what the
    /// run asks until every call of the group is answered, the last one's answer returned
    /// and the others' given through the answerer.
    fn call(&mut self, r: CallRequest) -> Option<CallAnswer> {
        let (call, more) = (r.call, r.more);
        let input = Input::CodeCall {
            call,
            name: r.name,
            input: r.input,
            more,
            refused: r.refused.map(|f| (f.code, f.message)),
        };
        self.group.push(call);
        self.p.feed(self.run, input);
        if more {
            return None;
        }
        let group = std::mem::take(&mut self.group);
        loop {
            self.drain();
            if group.iter().all(|c| self.answers.contains_key(c)) {
                break;
            }
            if !self.p.wait(self.run) {
                // The machine neither answered nor waits: the calls cannot go on.
                break;
            }
        }
        let mut last = None;
        for c in group {
            let result = self
                .answers
                .remove(&c)
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
        self.drain();
        self.interrupt.take().map(|r| match r {
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
        answers: HashMap::new(),
        interrupt: None,
        group: Vec::new(),
        answerer: h.answerer(),
    });
    h.run_cell_deferred(&cell, &mut |r| open.borrow_mut().call(r), &mut || {
        open.borrow_mut().poll()
    })
}

/// The helper's form of the machine's answer.
fn answer(result: CodeResult) -> CallAnswer {
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
