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
        decision(self.0.wait(approval_id, timeout, cancelled))
    }

    /// Forgets every approval (the run ended); later answers are stale.
    pub fn clear(&self) {
        self.0.clear();
    }
}

fn decision(w: Waited<bool>) -> Decision {
    match w {
        Waited::Answered(true) => Decision::Allowed,
        Waited::Answered(false) => Decision::Denied,
        Waited::TimedOut => Decision::Expired,
        Waited::Cancelled => Decision::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::Deadline;
    use std::time::Instant;

    /// The approval `id` as it stands `ms` virtual milliseconds after it was asked at `t0`.
    fn at(a: &Approvals, id: &str, t0: Instant, ms: u64) -> Option<Decision> {
        let end = Deadline::after(t0, APPROVAL_EXPIRY);
        a.0.poll(id, end, &|| false, t0 + Duration::from_millis(ms))
            .map(decision)
    }

    #[test]
    fn an_approval_expires_at_sixty_seconds_on_a_virtual_clock() {
        assert_eq!(APPROVAL_EXPIRY, Duration::from_secs(60));
        let a = Approvals::default();
        let t0 = Instant::now();
        a.open("r", "late");
        assert_eq!(at(&a, "late", t0, 59_999), None, "still open");
        assert!(
            a.answer("r", "late", true),
            "answered in its last millisecond"
        );
        assert_eq!(at(&a, "late", t0, 59_999), Some(Decision::Allowed));
        a.open("r", "never");
        assert_eq!(at(&a, "never", t0, 0), None);
        assert_eq!(at(&a, "never", t0, 59_999), None);
        assert_eq!(at(&a, "never", t0, 60_000), Some(Decision::Expired));
        assert!(
            !a.answer("r", "never", true),
            "an expired approval is stale"
        );
        a.open("r", "denied");
        assert!(a.answer("r", "denied", false));
        assert_eq!(at(&a, "denied", t0, 60_000), Some(Decision::Denied));
        a.open("r", "gone");
        a.clear();
        assert_eq!(at(&a, "gone", t0, 1), Some(Decision::Cancelled));
    }

    #[test]
    fn one_winning_answer_then_closed() {
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
        a.open("r", "z");
        assert_eq!(
            a.wait("z", Duration::from_secs(10), &|| true),
            Decision::Cancelled
        );
        assert!(!a.answer("r", "unknown", true));
        a.clear();
    }
}
