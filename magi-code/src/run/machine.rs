//! The run machine: its phase, the public inputs and outputs, and the moves between states.
//! The states themselves (`step`, `calls`, `compacting`) say what comes next; only this file
//! moves between them, so none of them names another.

use super::batch::{Callbacks, Calls, Hold, Origin, Queued};
use super::calls::{self, CallsNext};
use super::cell;
use super::compacting::{self, CompactNext, Compaction};
use super::compaction::{Compacted, Compactor};
use super::content::Content;
use super::io::{After, AppendKind, Config, End, Idle, Input, Output, State, Stored};
use super::outcome::{Finished, Persistence, RunOutcome};
use super::shared::Shared;
use super::step::{self, StepNext, Streaming};
use crate::history::room::Room;
use crate::history::{Body, Record};
use crate::wire::events::InputPersistedData;
use crate::wire::{DiagnosticCode, Event};
use protocol_core::ErrorCode;

/// What the run is doing now, with what it needs to go on.
#[derive(Debug)]
enum Phase {
    Admitted,
    Input(Record),
    Compacting(Compaction),
    Streaming(Box<Streaming>),
    Calls(Box<Calls>),
    Finishing(End),
    Finished,
}

/// One run: a turn, or a subagent's task.
#[derive(Debug)]
pub struct Run {
    sh: Shared,
    phase: Phase,
}

impl Run {
    /// A run admitted with `cfg`; [`Self::start`] begins it.
    #[must_use]
    pub fn new(cfg: Config) -> Self {
        Self {
            sh: Shared::new(cfg),
            phase: Phase::Admitted,
        }
    }

    /// Starts the run at `now` (ms on the driver's clock): its input's append goes out first,
    /// durable before any provider work.
    pub fn start(&mut self, now: u64) {
        if !matches!(self.phase, Phase::Admitted) {
            return;
        }
        let sh = &mut self.sh;
        sh.now = now;
        let message_id = sh.voice.fresh_id("u-");
        let user = sh.voice.record(Body::UserInput {
            run_id: sh.cfg.run_id.clone(),
            message_id: Some(message_id),
            text: sh.cfg.prompt.clone(),
        });
        sh.push(Output::Append {
            records: vec![user.clone()],
            kind: AppendKind::Input,
        });
        self.phase = Phase::Input(user);
    }

    /// The state the run is in.
    #[must_use]
    pub fn state(&self) -> State {
        match &self.phase {
            Phase::Admitted => State::Admitted,
            Phase::Input(_) => State::PersistingInput,
            Phase::Compacting(_) => State::Compacting,
            // A provider's call back that waits for the client says so; else it streams.
            Phase::Streaming(s) => match s.callbacks.as_ref().and_then(|cb| cb.inner.as_ref()) {
                Some(c) if c.waiting().is_some() => c.state(),
                _ => State::Streaming,
            },
            Phase::Calls(c) => c.state(),
            Phase::Finishing(_) => State::Finishing,
            Phase::Finished => State::Finished,
        }
    }

    /// The next thing for the driver to do. Once nothing more is queued it is
    /// [`Output::Idle`], what the run waits for now, so every drain ends with one; after
    /// [`Output::Finished`] it is `None`.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        if let Some(o) = self.sh.voice.queue.pop_front() {
            return Some(o);
        }
        (!matches!(self.phase, Phase::Finished)).then(|| Output::Idle(self.idle()))
    }

    /// What the run waits for now, whatever is still queued: for tests, which look between
    /// an input and the outputs it queued (a driver only polls).
    #[cfg(test)]
    pub(crate) fn idle_now(&self) -> Idle {
        self.idle()
    }

    /// What the run waits for when no output is pending.
    fn idle(&self) -> Idle {
        let (waiting, until) = match &self.phase {
            Phase::Calls(c) => (c.waiting(), c.deadline()),
            Phase::Streaming(s) => s
                .callbacks
                .as_ref()
                .and_then(|cb| cb.inner.as_ref())
                .map_or((None, None), |c| (c.waiting(), c.deadline())),
            _ => (None, None),
        };
        Idle {
            waiting,
            until,
            stop_streaming: matches!(&self.phase, Phase::Streaming(s) if s.over),
        }
    }

    /// Acts on `input`, which happened at `now`.
    pub fn handle(&mut self, input: Input, now: u64) {
        self.sh.now = self.sh.now.max(now);
        if matches!(self.phase, Phase::Finished | Phase::Admitted) {
            return;
        }
        match input {
            Input::Cancel => self.sh.cancelled = true,
            Input::OutputLost => {
                self.sh.voice.output_lost = true;
                self.sh.cancelled = true;
            }
            input => {
                let phase = std::mem::replace(&mut self.phase, Phase::Finished);
                self.phase = self.step(phase, input);
            }
        }
        // Waits end at once on cancellation; everything else notices it where it decides.
        let calls_back = matches!(&self.phase, Phase::Streaming(s) if s.callbacks.is_some());
        if self.sh.cancelled && (matches!(self.phase, Phase::Calls(_)) || calls_back) {
            let phase = std::mem::replace(&mut self.phase, Phase::Finished);
            self.phase = self.step(phase, Input::Tick);
        }
    }

    /// The phase after `input` in `phase`; an input the phase does not wait for changes
    /// nothing.
    fn step(&mut self, phase: Phase, input: Input) -> Phase {
        let sh = &mut self.sh;
        match (phase, input) {
            (phase, Input::Appended(r)) => {
                if let Ok(Stored {
                    room: Some(room), ..
                }) = &r
                {
                    sh.content.refresh(*room);
                }
                self.appended(phase, r)
            }
            (Phase::Streaming(mut s), Input::Model(ev)) => {
                step::on_model(sh, &mut s, ev);
                Phase::Streaming(s)
            }
            (Phase::Streaming(mut s), Input::Flush) => {
                s.seg.flush(&mut sh.voice);
                Phase::Streaming(s)
            }
            (Phase::Streaming(mut s), Input::DeltaRefused(d)) => {
                let part = usize::try_from(d.part).unwrap_or(usize::MAX);
                s.seg.refused(&d.message_id, part, d.text);
                Phase::Streaming(s)
            }
            (
                Phase::Streaming(s),
                Input::Retry {
                    attempt,
                    of,
                    wait_ms,
                },
            ) => {
                step::on_retry(sh, "provider", (attempt, of), wait_ms);
                Phase::Streaming(s)
            }
            (
                Phase::Compacting(c),
                Input::Retry {
                    attempt,
                    of,
                    wait_ms,
                },
            ) if compacting::summarizing(&c) => {
                step::on_retry(sh, "summary", (attempt, of), wait_ms);
                Phase::Compacting(c)
            }
            (Phase::Streaming(mut s), Input::StepEnded(r)) => {
                // Calls the provider left in flight end with its step.
                if let Some(mut cb) = s.callbacks.take() {
                    cb.drain(sh);
                }
                if sh.degraded {
                    // A call's record was lost mid-step: nothing more is asked or stored.
                    return self.finish(End::Failed(ErrorCode::PersistenceFailed));
                }
                let next = step::ended(sh, *s, r);
                self.after_step(next)
            }
            // A cell a provider's `exec` call runs: the helper's calls are the cell's.
            (Phase::Streaming(mut s), input @ Input::Call { .. })
                if s.callbacks.as_ref().is_some_and(Callbacks::in_cell) =>
            {
                let hold = step_hold(sh);
                if let Some(cb) = s.callbacks.as_mut() {
                    cb.route(sh, input, hold);
                }
                Phase::Streaming(s)
            }
            (
                Phase::Streaming(mut s),
                Input::Call {
                    call,
                    name,
                    input,
                    more,
                    refused,
                    id,
                },
            ) => {
                let q = Queued {
                    call,
                    name,
                    input,
                    refused,
                    id,
                };
                step::cut_segment(sh, &mut s);
                let hold = step_hold(sh);
                s.callbacks
                    .get_or_insert_with(|| Callbacks::new(Origin::Step, None))
                    .take(sh, q, more, hold);
                Phase::Streaming(s)
            }
            (
                Phase::Streaming(mut s),
                input @ (Input::Tick
                | Input::Approval { .. }
                | Input::HookEnded(_)
                | Input::ToolsEnded(_)
                | Input::ClientResult { .. }
                | Input::CellEnded { .. }
                | Input::CellStopped),
            ) => {
                let hold = step_hold(sh);
                if let Some(cb) = s.callbacks.as_mut() {
                    cb.route(sh, input, hold);
                }
                Phase::Streaming(s)
            }
            (Phase::Compacting(c), Input::SummaryEnded(r)) => {
                let next = compacting::summary(sh, c, r);
                self.after_compaction(next)
            }
            (Phase::Calls(c), input) => {
                let next = if c.in_cell() {
                    cell::on_input(sh, c, input)
                } else {
                    calls::on_call_input(sh, c, input)
                };
                self.after_calls(next)
            }
            (phase, _) => phase,
        }
    }

    fn appended(&mut self, phase: Phase, r: Result<Stored, ErrorCode>) -> Phase {
        match phase {
            Phase::Input(user) => self.input_stored(&user, r),
            Phase::Compacting(c) => {
                let next = compacting::stored(&mut self.sh, c, r);
                self.after_compaction(next)
            }
            // A cell's nested calls wait for their `code_call` records.
            Phase::Calls(c) if c.in_cell() => {
                let next = cell::on_input(&mut self.sh, c, Input::Appended(r));
                self.after_calls(next)
            }
            Phase::Calls(c) => {
                let next = calls::step_stored(&mut self.sh, c, r);
                self.after_calls(next)
            }
            // A provider's calls mid-step wait for their `tool_call` records.
            Phase::Streaming(mut s) => {
                let hold = step_hold(&self.sh);
                if let Some(cb) = s.callbacks.as_mut() {
                    cb.route(&mut self.sh, Input::Appended(r), hold);
                }
                Phase::Streaming(s)
            }
            Phase::Finishing(end) => self.final_stored(end, r),
            other => other,
        }
    }

    fn input_stored(&mut self, user: &Record, r: Result<Stored, ErrorCode>) -> Phase {
        let stored = match r {
            Ok(s) => s,
            Err(code) => {
                return self.finished(Finished {
                    outcome: RunOutcome::Failed,
                    persistence: Persistence::NotStarted,
                    revision: None,
                    error_code: Some(code),
                })
            }
        };
        let sh = &mut self.sh;
        let message_id = match &user.body {
            Body::UserInput { message_id, .. } => message_id.clone().unwrap_or_default(),
            _ => String::new(),
        };
        let (session_id, run_id) = sh.voice.ids();
        sh.voice.critical(Event::InputPersisted(InputPersistedData {
            session_id,
            run_id,
            message_id,
            durable: crate::wire::common::True,
            revision: stored.revision.unwrap_or_default(),
        }));
        if let Some(summary) = sh.cfg.left_out.take() {
            sh.voice
                .diagnostic(DiagnosticCode::McpToolsLeftOut, &summary);
        }
        let history = std::mem::take(&mut sh.cfg.history);
        let (mut comp, items) = Compactor::start(
            history,
            sh.cfg.context_window,
            sh.cfg.fixed_bytes,
            sh.cfg.cwd.clone(),
            &sh.cfg.prompt,
        );
        // The input's record index: the history's count less it (a subagent's history is its
        // own file, which its snapshot already counted).
        let through = stored
            .records
            .map_or_else(|| comp.through().max(1), |n| n.saturating_sub(1));
        comp.begin_turn(through, items.len() - 1);
        comp.note(std::slice::from_ref(user));
        sh.comp = comp;
        sh.items = items;
        sh.content = Content::start(stored.room.unwrap_or_else(Room::none));
        let next = step::begin(sh);
        self.after_step(next)
    }

    fn after_step(&mut self, next: StepNext) -> Phase {
        match next {
            StepNext::Stream(s) => Phase::Streaming(s),
            StepNext::Compact(at) => {
                let next = compacting::start(&mut self.sh, at);
                self.after_compaction(next)
            }
            StepNext::Calls(items, list) => {
                let next = calls::start_calls(&mut self.sh, items, list);
                self.after_calls(next)
            }
            StepNext::Finish(end) => self.finish(end),
        }
    }

    /// Goes on where a compaction started once it is over.
    fn after_compaction(&mut self, next: CompactNext) -> Phase {
        let sh = &mut self.sh;
        let next = match next {
            CompactNext::Wait(c) => return Phase::Compacting(c),
            CompactNext::Resume(at @ (After::Due | After::NoRoom), compacted) => {
                step::before_request(sh, at, compacted)
            }
            CompactNext::Resume(After::Overflow, Compacted::Done) => {
                sh.steps -= 1;
                step::begin(sh)
            }
            CompactNext::Resume(After::Overflow, Compacted::Unstored) => {
                sh.degraded = true;
                StepNext::Finish(End::Failed(ErrorCode::PersistenceFailed))
            }
            CompactNext::Resume(After::Overflow, _) => step::overflow_stays(sh),
        };
        self.after_step(next)
    }

    fn after_calls(&mut self, next: CallsNext) -> Phase {
        match next {
            CallsNext::Wait(c) => Phase::Calls(c),
            CallsNext::Stepped => {
                let next = step::begin(&mut self.sh);
                self.after_step(next)
            }
            CallsNext::Finish(end) => self.finish(end),
            // Only a cell's nested batch answers so; the run's own never does.
            CallsNext::Answered(_) => self.finish(End::Failed(ErrorCode::ExecutionFailed)),
        }
    }

    /// Appends the last records with `run_finished` (unless an earlier record was lost).
    fn finish(&mut self, end: End) -> Phase {
        let (outcome, code) = self.terminal(end);
        let sh = &mut self.sh;
        let mut records = sh.unstored();
        records.push(sh.voice.record(Body::RunFinished {
            run_id: sh.cfg.run_id.clone(),
            outcome,
            error_code: code.map(|c| c.as_str().to_owned()),
        }));
        if sh.degraded {
            return self.finished(Finished {
                outcome,
                persistence: Persistence::Degraded,
                revision: None,
                error_code: code.or(Some(ErrorCode::PersistenceFailed)),
            });
        }
        sh.push(Output::Append {
            records,
            kind: AppendKind::Final,
        });
        Phase::Finishing(end)
    }

    /// The outcome and code `end` reports; a lost output overrides it.
    const fn terminal(&self, end: End) -> (RunOutcome, Option<ErrorCode>) {
        if self.sh.voice.output_lost {
            return (RunOutcome::Failed, Some(ErrorCode::OutputUnavailable));
        }
        match end {
            End::Completed => (RunOutcome::Completed, None),
            End::Cancelled => (RunOutcome::Cancelled, None),
            End::Failed(c) => (RunOutcome::Failed, Some(c)),
        }
    }

    fn final_stored(&mut self, end: End, r: Result<Stored, ErrorCode>) -> Phase {
        let (outcome, code) = self.terminal(end);
        let finished = match r {
            // Every append succeeded: durable, even if the projection cannot be rebuilt (then
            // the revision is null and the client reopens explicitly).
            Ok(stored) => Finished {
                outcome,
                persistence: Persistence::Durable,
                revision: stored.revision,
                error_code: code,
            },
            Err(_) => Finished {
                outcome,
                persistence: Persistence::Degraded,
                revision: None,
                error_code: code.or(Some(ErrorCode::PersistenceFailed)),
            },
        };
        self.finished(finished)
    }

    fn finished(&mut self, f: Finished) -> Phase {
        self.sh.push(Output::Finished(f));
        Phase::Finished
    }
}

/// How a provider's calls mid-step run: as direct calls, cancelled with the run.
const fn step_hold(sh: &Shared) -> Hold {
    Hold {
        cancel: sh.cancelled,
        until: None,
    }
}
