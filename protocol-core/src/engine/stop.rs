//! The stopping sequence: draining, cleanup wait, exit.

use super::state::{Engine, Output, State, StopPhase, Stopping};
use crate::error::{ErrorCode, StopReason};
use crate::limits::{CLEANUP_WAIT_MS, CLOSING_DEADLINE_MS};
use crate::time::Time;
use crate::worker::WorkerCommand;

impl Engine {
    pub(super) fn is_stopping(&self) -> bool {
        matches!(self.state, State::Stopping(_))
    }

    pub(super) fn stop(&mut self, reason: StopReason, now: Time) {
        let fatal_output = matches!(
            reason,
            StopReason::OutputBroken | StopReason::OutputDeadline | StopReason::QueueOverflow
        );
        if let State::Stopping(s) = &mut self.state {
            // Already stopping: only a dead output changes the outcome.
            if fatal_output && s.phase == StopPhase::Draining {
                s.exit = 1;
                s.reason = reason;
                self.outq.abandon();
                self.incomplete_pending = false;
                self.begin_cleanup(now);
            }
            return;
        }
        let previous = std::mem::replace(
            &mut self.state,
            State::Stopping(Stopping {
                reason,
                phase: StopPhase::Draining,
                exit: match reason {
                    StopReason::Shutdown | StopReason::Eof => 0,
                    _ => 1,
                },
                // EOF always drains under the closing deadline; any stop that must wait for a run
                // terminal gets the same bound.
                closing_deadline: (reason == StopReason::Eof
                    || self.run.is_some()
                    || self.turn.is_some())
                .then(|| now.plus_ms(CLOSING_DEADLINE_MS)),
                cleanup_deadline: None,
            }),
        );
        if let State::Starting { init_id } = previous {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelStartup));
            self.reserved -= 1;
            if !fatal_output {
                self.respond(Some(&init_id), Err(ErrorCode::StartupCancelled), now);
            }
        }
        if let Some(op) = &mut self.op {
            if !op.answered {
                op.answered = true;
                let target = op.id.clone();
                self.outputs
                    .push_back(Output::Worker(WorkerCommand::CancelOp {
                        id: target.clone(),
                    }));
                self.reserved -= 1;
                if !fatal_output {
                    self.respond(Some(&target), Err(ErrorCode::OperationCancelled), now);
                }
            }
        }
        // A turn awaiting admission is cancelled but still answered by its worker; an active
        // run is cancelled and still owes its terminal event, which draining waits for.
        if let Some(turn) = &self.turn {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelOp { id: turn.clone() }));
        }
        if let Some(run_id) = &self.run {
            self.outputs
                .push_back(Output::Worker(WorkerCommand::CancelRun {
                    run_id: run_id.clone(),
                }));
        }
        if fatal_output {
            self.outq.abandon();
            self.incomplete_pending = false;
            self.held = None;
            self.begin_cleanup(now);
        }
    }

    pub(super) fn check_drained(&mut self, now: Time) {
        if let State::Stopping(s) = &self.state {
            let run_done = self.run.is_none() && self.turn.is_none() && self.held.is_none();
            if s.phase == StopPhase::Draining
                && self.outq.is_empty()
                && !self.incomplete_pending
                && run_done
            {
                self.begin_cleanup(now);
            }
        }
    }

    pub(super) fn begin_cleanup(&mut self, now: Time) {
        if let State::Stopping(s) = &mut self.state {
            if s.phase == StopPhase::Draining {
                s.phase = StopPhase::CleanupWait;
                s.closing_deadline = None;
                s.cleanup_deadline = Some(now.plus_ms(CLEANUP_WAIT_MS));
                self.outputs
                    .push_back(Output::Worker(WorkerCommand::Cleanup));
            }
        }
    }

    pub(super) fn exit(&mut self, _now: Time) {
        if let State::Stopping(s) = &mut self.state {
            if s.phase != StopPhase::Exited {
                s.phase = StopPhase::Exited;
                s.cleanup_deadline = None;
                self.outputs.push_back(Output::Exit { code: s.exit });
            }
        }
    }
}
