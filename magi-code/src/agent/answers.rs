//! A table of questions the client answers from the protocol loop while a run waits: one
//! winning answer each; once answered, expired or cancelled a question is closed, and later
//! answers are refused. Approvals and client tool calls are both this table.

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
        let end = Instant::now() + timeout;
        let mut s = self.lock();
        let outcome = loop {
            let Some(p) = s.get_mut(id) else {
                break Waited::Cancelled;
            };
            if let Some(a) = p.answer.take() {
                break Waited::Answered(a);
            }
            if cancelled() {
                break Waited::Cancelled;
            }
            let now = Instant::now();
            if now >= end {
                break Waited::TimedOut;
            }
            // Short slices so cancellation is seen promptly.
            let slice = (end - now).min(Duration::from_millis(50));
            s = self
                .cv
                .wait_timeout(s, slice)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        if let Some(p) = s.get_mut(id) {
            p.open = false;
        }
        outcome
    }

    /// Forgets every question (the run ended); later answers are refused.
    pub fn clear(&self) {
        self.lock().clear();
    }
}
