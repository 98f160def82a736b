//! A table of questions the client answers from the protocol loop while a run waits: one
//! winning answer each; once answered, expired or cancelled a question is closed, and later
//! answers are refused. Approvals and client tool calls are both this table.

use crate::util::clock::Deadline;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited<A> {
    /// The client answered.
    Answered(A),
    /// No answer in time.
    TimedOut,
    /// The run was cancelled (or the question forgotten) while waiting.
    Cancelled,
}

#[derive(Debug)]
struct Pending<A> {
    run_id: String,
    answer: Option<A>,
    open: bool,
}

/// Open questions of the active run, keyed by their IDs.
#[derive(Debug)]
pub struct Answers<A> {
    state: Mutex<HashMap<String, Pending<A>>>,
    cv: Condvar,
}

impl<A> Default for Answers<A> {
    fn default() -> Self {
        Self {
            state: Mutex::new(HashMap::new()),
            cv: Condvar::new(),
        }
    }
}

impl<A> Answers<A> {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Pending<A>>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens question `id` of `run_id`.
    pub fn open(&self, run_id: &str, id: &str) {
        self.lock().insert(
            id.to_owned(),
            Pending {
                run_id: run_id.to_owned(),
                answer: None,
                open: true,
            },
        );
    }

    /// Records an answer; false for an unknown, answered, expired or cancelled question, or
    /// one of another run.
    pub fn answer(&self, run_id: &str, id: &str, answer: A) -> bool {
        let mut s = self.lock();
        match s.get_mut(id) {
            Some(p) if p.open && p.answer.is_none() && p.run_id == run_id => {
                p.answer = Some(answer);
                self.cv.notify_all();
                true
            }
            _ => false,
        }
    }

    /// Waits for the answer at most `timeout`, checking `cancelled`; closes the question.
    pub fn wait(&self, id: &str, timeout: Duration, cancelled: &dyn Fn() -> bool) -> Waited<A> {
        let end = Deadline::after(Instant::now(), timeout);
        let mut s = self.lock();
        loop {
            if let Some(w) = Self::decide(&mut s, id, end, cancelled, Instant::now()) {
                return w;
            }
            // Short slices so cancellation is seen promptly.
            let slice = end.left(Instant::now()).min(Duration::from_millis(50));
            s = self
                .cv
                .wait_timeout(s, slice)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// How the wait for `id` stands at `now` against `end`: `None` while it goes on; once it
    /// ends the question is closed. The sans-IO step of [`Self::wait`], so expiry is tested on
    /// a virtual clock.
    pub fn poll(
        &self,
        id: &str,
        end: Deadline,
        cancelled: &dyn Fn() -> bool,
        now: Instant,
    ) -> Option<Waited<A>> {
        Self::decide(&mut self.lock(), id, end, cancelled, now)
    }

    fn decide(
        s: &mut HashMap<String, Pending<A>>,
        id: &str,
        end: Deadline,
        cancelled: &dyn Fn() -> bool,
        now: Instant,
    ) -> Option<Waited<A>> {
        // A forgotten question (the run ended) waits no more.
        let Some(p) = s.get_mut(id) else {
            return Some(Waited::Cancelled);
        };
        let outcome = if let Some(a) = p.answer.take() {
            Waited::Answered(a)
        } else if cancelled() {
            Waited::Cancelled
        } else if end.passed(now) {
            Waited::TimedOut
        } else {
            return None;
        };
        p.open = false;
        Some(outcome)
    }

    /// Forgets every question (the run ended); later answers are refused.
    pub fn clear(&self) {
        self.lock().clear();
    }
}
