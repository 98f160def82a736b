//! Deadlines: the output deadline of the oldest frame, the closing deadline and the cleanup wait.

use super::state::{Engine, State, StopPhase};
use crate::error::StopReason;
use crate::time::Time;

impl Engine {
    /// Acts on every deadline that has passed at `now`.
    pub(super) fn expire(&mut self, now: Time) {
        if self.outq.oldest_deadline().is_some_and(|d| d <= now) {
            self.stop(StopReason::OutputDeadline, now);
        }
        let State::Stopping(s) = &mut self.state else {
            return;
        };
        match s.phase {
            StopPhase::Draining if s.closing_deadline.is_some_and(|d| d <= now) => {
                s.exit = 1;
                self.outq.abandon();
                self.begin_cleanup(now);
            }
            StopPhase::CleanupWait if s.cleanup_deadline.is_some_and(|d| d <= now) => {
                self.exit(now)
            }
            _ => {}
        }
    }

    /// The earliest pending deadline; none once the engine has exited.
    pub(super) fn next_deadline(&self) -> Option<Time> {
        let mut t = self.outq.oldest_deadline();
        if let State::Stopping(s) = &self.state {
            if s.phase == StopPhase::Exited {
                return None;
            }
            for d in [s.closing_deadline, s.cleanup_deadline]
                .into_iter()
                .flatten()
            {
                t = Some(t.map_or(d, |t| t.min(d)));
            }
        }
        t
    }
}
