//! Approvals of the active run: one winning answer each, expiry and cancellation deny.

use super::answers::{Answers, Waited};
use std::time::Duration;

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

/// Approvals of the active run; one winning answer each.
#[derive(Debug, Default)]
pub struct Approvals(Answers<bool>);

impl Approvals {
    /// Opens an approval for `run_id`.
    pub fn open(&self, run_id: &str, approval_id: &str) {
        self.0.open(run_id, approval_id);
    }

    /// Records an answer; false for an unknown, answered, expired or cancelled approval, or a
    /// run mismatch (`stale_approval`).
    pub fn answer(&self, run_id: &str, approval_id: &str, allow: bool) -> bool {
        self.0.answer(run_id, approval_id, allow)
    }

    /// Waits for the answer at most `timeout`, checking `cancelled`; closes the approval.
    pub fn wait(
        &self,
        approval_id: &str,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Decision {
        match self.0.wait(approval_id, timeout, cancelled) {
            Waited::Answered(true) => Decision::Allowed,
            Waited::Answered(false) => Decision::Denied,
            Waited::TimedOut => Decision::Expired,
            Waited::Cancelled => Decision::Cancelled,
        }
    }

    /// Forgets every approval (the run ended); later answers are stale.
    pub fn clear(&self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

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
