//! One tool call of a run: policy, approval, execution, and its activity events and records.

use crate::runner::Run;
use crate::settings::Policy;
use crate::tools::{self, ToolClass};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an approval waits before it defaults to deny.
pub const APPROVAL_EXPIRY: Duration = Duration::from_millis(60_000);
/// Longest activity or approval summary.
pub const SUMMARY_BYTES: usize = 1_024;

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

/// Cuts `s` to at most `max` bytes at a character boundary.
#[must_use]
pub fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Runs one tool call of `run`, emitting `activity` (and `approval.requested`) events and
/// adding its records; returns the tool's output for the model, or `None` when refused.
pub fn call(
    run: &mut Run<'_>,
    name: &str,
    input: &Value,
    records: &mut Vec<Value>,
) -> Option<String> {
    let activity_id = format!("t-{}", uuid::Uuid::new_v4().simple());
    let shown = crate::redact::safe_name(name).unwrap_or_else(|| "tool".into());
    let described = bounded(&tools::describe(name, input), SUMMARY_BYTES);
    let started = json!({ "activity_id": activity_id, "kind": "tool", "state": "started", "name": shown, "summary": described });
    run.critical("activity", started.clone());
    records.push(run.record("activity", started));
    let settings = &run.rt.settings;
    let policy = tools::class(name).map(|c| match c {
        ToolClass::Read => settings.tool_read,
        ToolClass::Write => settings.tool_write,
        ToolClass::Shell => settings.tool_shell,
    });
    let refused = match policy {
        None => Some("unknown tool"),
        Some(Policy::Deny) => Some("denied by policy"),
        Some(Policy::Allow) => None,
        Some(Policy::Ask) => {
            let approval_id = uuid::Uuid::new_v4().hyphenated().to_string();
            let approvals = &run.shared.approvals;
            approvals.open(&run.run_id, &approval_id);
            run.critical(
                "approval.requested",
                json!({ "approval_id": approval_id, "summary": described, "expires_in_ms": APPROVAL_EXPIRY.as_millis() as u64 }),
            );
            let cancel = run.cancel;
            match approvals.wait(&approval_id, APPROVAL_EXPIRY, &|| cancel.is_cancelled()) {
                Decision::Allowed => None,
                Decision::Denied => Some("approval denied"),
                Decision::Expired => Some("approval expired"),
                Decision::Cancelled => Some("cancelled"),
            }
        }
    };
    let (state, summary, output) = match refused {
        Some(why) => ("failed", format!("{described}: {why}"), None),
        None => {
            let o = tools::run(name, input, &run.rt.cwd, run.cancel);
            (
                if o.ok { "completed" } else { "failed" },
                format!("{described}: {}", o.summary),
                Some(o.output),
            )
        }
    };
    let done = json!({
        "activity_id": activity_id, "kind": "tool", "state": state, "name": shown,
        "summary": bounded(&crate::redact::sanitize_text(&summary), SUMMARY_BYTES),
    });
    run.critical("activity", done.clone());
    records.push(run.record("activity", done));
    output
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

    #[test]
    fn bounds_cut_at_char_boundaries() {
        assert_eq!(bounded("ééé", 3), "é");
        assert_eq!(bounded("abc", 10), "abc");
    }
}
