//! Approvals of the active run: one winning answer each, expiry and cancellation deny.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an approval waits before it defaults to deny.
pub const APPROVAL_EXPIRY: Duration =
    Duration::from_millis(protocol_core::limits::APPROVAL_EXPIRY_MS);

/// How an approval ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The client allowed it.
    Allowed,
    /// The client denied it.
    Denied,
    /// No answer before expiry: denied.
    Expired,
    /// The run was cancelled while waiting: denied.
    Cancelled,
}

#[derive(Debug)]
struct Pending {
    run_id: String,
    answer: Option<bool>,
    open: bool,
}

/// Approvals of the active run; one winning answer each.
#[derive(Debug, Default)]
pub struct Approvals {
    state: Mutex<HashMap<String, Pending>>,
    cv: Condvar,
}

impl Approvals {
    /// Opens an approval for `run_id`.
    pub fn open(&self, run_id: &str, approval_id: &str) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.insert(
            approval_id.to_owned(),
            Pending {
                run_id: run_id.to_owned(),
                answer: None,
                open: true,
            },
        );
    }

    /// Records an answer; false for an unknown, answered, expired or cancelled approval, or a
    /// run mismatch (`stale_approval`).
    pub fn answer(&self, run_id: &str, approval_id: &str, allow: bool) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match s.get_mut(approval_id) {
            Some(p) if p.open && p.answer.is_none() && p.run_id == run_id => {
                p.answer = Some(allow);
                self.cv.notify_all();
                true
            }
            _ => false,
        }
    }

    /// Waits for the answer at most `timeout`, checking `cancelled`; closes the approval.
    pub fn wait(
        &self,
        approval_id: &str,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Decision {
        let end = Instant::now() + timeout;
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let decision = loop {
            let Some(p) = s.get(approval_id) else {
                break Decision::Cancelled;
            };
            if let Some(allow) = p.answer {
                break if allow {
                    Decision::Allowed
                } else {
                    Decision::Denied
                };
            }
            if cancelled() {
                break Decision::Cancelled;
            }
            let now = Instant::now();
            if now >= end {
                break Decision::Expired;
            }
            // Short slices so cancellation is seen promptly.
            let slice = (end - now).min(Duration::from_millis(50));
            s = self
                .cv
                .wait_timeout(s, slice)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        if let Some(p) = s.get_mut(approval_id) {
            p.open = false;
        }
        decision
    }

    /// Forgets every approval (the run ended); later answers are stale.
    pub fn clear(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_winning_answer_and_expiry() {
        let a = Approvals::default();
        a.open("r", "x");
        assert!(!a.answer("other-run", "x", true));
        assert!(a.answer("r", "x", true));
        assert!(!a.answer("r", "x", false), "answered once");
        assert_eq!(
            a.wait("x", Duration::from_millis(10), &|| false),
            Decision::Allowed
        );
        assert!(!a.answer("r", "x", true), "closed");
        a.open("r", "y");
        let t = Instant::now();
        assert_eq!(
            a.wait("y", Duration::from_millis(120), &|| false),
            Decision::Expired
        );
        assert!(t.elapsed() >= Duration::from_millis(120));
        assert!(!a.answer("r", "y", true), "expired approvals are stale");
        a.open("r", "z");
        assert_eq!(
            a.wait("z", Duration::from_secs(10), &|| true),
            Decision::Cancelled
        );
        assert!(!a.answer("r", "unknown", true));
        a.clear();
    }
}
