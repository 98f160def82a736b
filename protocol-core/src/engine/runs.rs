//! Run events and their flow control: a critical event waits for room, a best-effort one drops.

use super::state::{Engine, State};
use crate::encode;
use crate::error::{ErrorCode, StopReason};
use crate::time::Time;
use crate::worker::WorkerEvent;

impl Engine {
    pub(super) fn run_event(&mut self, ev: WorkerEvent, now: Time) {
        let (run_id, critical) = match &ev {
            WorkerEvent::RunEvent {
                run_id, critical, ..
            } => (run_id, *critical),
            WorkerEvent::RunFinished { run_id, .. } => (run_id, true),
            _ => return,
        };
        if self.run.as_ref() != Some(run_id) {
            return;
        }
        if self.held.is_some() || !self.room() {
            if critical && self.held.is_none() {
                self.held = Some(ev);
            }
            // A best-effort delta is dropped before it gets a seq (`decisions.md` 2).
            return;
        }
        let instance = &self.instance_id;
        let pushed = match &ev {
            WorkerEvent::RunEvent { name, data, .. } => self
                .outq
                .push(now, |seq, b| encode::event(b, instance, seq, name, data)),
            WorkerEvent::RunFinished { data, .. } => self.outq.push(now, |seq, b| {
                encode::event(b, instance, seq, "run.finished", data)
            }),
            _ => return,
        };
        if pushed.is_err() {
            // Events are built bounded by the runner; one that cannot fit is a lost critical
            // delivery, which ends the connection rather than the promise.
            self.stop(StopReason::QueueOverflow, now);
            return;
        }
        if let WorkerEvent::RunFinished { view, .. } = ev {
            self.run = None;
            if let (Some(view), State::Ready(current)) = (view, &mut self.state) {
                *current = view;
            }
            self.status_cache = None;
        }
    }

    pub(super) fn flush_held(&mut self, now: Time) {
        if self.held.is_some() && self.room() {
            if let Some(ev) = self.held.take() {
                self.run_event(ev, now);
            }
        }
    }

    /// The attachment check every turn method starts with (`decisions.md` 29).
    pub(super) fn check_session(&self, session_id: &str) -> Result<(), ErrorCode> {
        let State::Ready(view) = &self.state else {
            return Err(ErrorCode::NotInitialized);
        };
        match view.session_id.as_deref() {
            None => Err(ErrorCode::SessionMissing),
            Some(s) if s == session_id => Ok(()),
            Some(_) => Err(ErrorCode::StaleSession),
        }
    }
}
