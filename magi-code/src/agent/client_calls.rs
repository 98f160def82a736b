//! Pending `client.tools` calls of the active run: one winning `client.tool.result` each;
//! a timed-out or cancelled call is closed, so later answers are `stale_call`.

use super::answers::{Answers, Waited};
use std::time::Duration;

/// How long a client tool call waits for its answer (the advertised `client_tool_timeout_ms`).
pub const CLIENT_TOOL_TIMEOUT: Duration =
    Duration::from_millis(protocol_core::limits::CLIENT_TOOL_TIMEOUT_MS);

/// How a client tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallEnd {
    /// The client answered.
    Answered {
        /// Whether its tool succeeded.
        ok: bool,
        /// Its output.
        output: String,
    },
    /// No answer in time.
    TimedOut,
    /// The run was cancelled while waiting.
    Cancelled,
}

/// The client tool calls of the active run, answered from the protocol loop.
#[derive(Debug, Default)]
pub struct ClientCalls(Answers<(bool, String)>);

impl ClientCalls {
    /// Opens call `call_id` of `run_id`.
    pub fn open(&self, run_id: &str, call_id: &str) {
        self.0.open(run_id, call_id);
    }

    /// Records an answer; false (`stale_call`) for an unknown, answered, timed-out or cancelled
    /// call, or one of another run.
    pub fn answer(&self, run_id: &str, call_id: &str, ok: bool, output: String) -> bool {
        self.0.answer(run_id, call_id, (ok, output))
    }

    /// Waits for the answer at most `timeout`, checking `cancelled`; closes the call.
    pub fn wait(&self, call_id: &str, timeout: Duration, cancelled: &dyn Fn() -> bool) -> CallEnd {
        call_end(self.0.wait(call_id, timeout, cancelled))
    }

    /// Forgets every call (the run ended); later answers are stale.
    pub fn clear(&self) {
        self.0.clear();
    }
}

fn call_end(w: Waited<(bool, String)>) -> CallEnd {
    match w {
        Waited::Answered((ok, output)) => CallEnd::Answered { ok, output },
        Waited::TimedOut => CallEnd::TimedOut,
        Waited::Cancelled => CallEnd::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::Deadline;
    use std::time::Instant;

    #[test]
    fn one_winning_answer_then_stale() {
        let c = ClientCalls::default();
        c.open("r", "x");
        assert!(!c.answer("other-run", "x", true, "a".into()));
        assert!(c.answer("r", "x", false, "boom".into()));
        assert!(!c.answer("r", "x", true, "again".into()), "answered once");
        assert_eq!(
            c.wait("x", Duration::from_millis(10), &|| false),
            CallEnd::Answered {
                ok: false,
                output: "boom".into()
            }
        );
        assert!(!c.answer("r", "x", true, String::new()), "closed");
        assert!(!c.answer("r", "unknown", true, String::new()));
    }

    /// Call `id` as it stands `ms` virtual milliseconds after it was sent at `t0`.
    fn at(c: &ClientCalls, id: &str, t0: Instant, ms: u64, cancelled: bool) -> Option<CallEnd> {
        let end = Deadline::after(t0, CLIENT_TOOL_TIMEOUT);
        c.0.poll(id, end, &|| cancelled, t0 + Duration::from_millis(ms))
            .map(call_end)
    }

    #[test]
    fn a_call_times_out_at_120_seconds_on_a_virtual_clock_and_cancel_closes_it() {
        assert_eq!(CLIENT_TOOL_TIMEOUT, Duration::from_secs(120));
        let c = ClientCalls::default();
        let t0 = Instant::now();
        c.open("r", "late");
        assert_eq!(at(&c, "late", t0, 119_999, false), None, "still open");
        assert!(
            c.answer("r", "late", true, "ok".into()),
            "its last millisecond"
        );
        assert_eq!(
            at(&c, "late", t0, 119_999, false),
            Some(CallEnd::Answered {
                ok: true,
                output: "ok".into()
            })
        );
        c.open("r", "y");
        assert_eq!(at(&c, "y", t0, 119_999, false), None);
        assert_eq!(at(&c, "y", t0, 120_000, false), Some(CallEnd::TimedOut));
        assert!(!c.answer("r", "y", true, String::new()), "timed out");
        c.open("r", "z");
        assert_eq!(at(&c, "z", t0, 1, true), Some(CallEnd::Cancelled));
        assert!(!c.answer("r", "z", true, String::new()), "cancelled");
        c.open("r", "w");
        c.clear();
        assert!(!c.answer("r", "w", true, String::new()), "run ended");
        assert_eq!(at(&c, "w", t0, 1, false), Some(CallEnd::Cancelled));
    }

    #[test]
    fn an_answer_from_another_thread_wakes_the_wait() {
        let c = std::sync::Arc::new(ClientCalls::default());
        c.open("r", "x");
        let c2 = c.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            c2.answer("r", "x", true, "done".into())
        });
        assert_eq!(
            c.wait("x", Duration::from_secs(10), &|| false),
            CallEnd::Answered {
                ok: true,
                output: "done".into()
            }
        );
        assert!(h.join().unwrap());
    }
}
