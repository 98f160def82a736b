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
        match self.0.wait(call_id, timeout, cancelled) {
            Waited::Answered((ok, output)) => CallEnd::Answered { ok, output },
            Waited::TimedOut => CallEnd::TimedOut,
            Waited::Cancelled => CallEnd::Cancelled,
        }
    }

    /// Forgets every call (the run ended); later answers are stale.
    pub fn clear(&self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn timeout_and_cancel_close_the_call() {
        let c = ClientCalls::default();
        c.open("r", "y");
        let t = Instant::now();
        assert_eq!(
            c.wait("y", Duration::from_millis(120), &|| false),
            CallEnd::TimedOut
        );
        assert!(t.elapsed() >= Duration::from_millis(120));
        assert!(!c.answer("r", "y", true, String::new()), "timed out");
        c.open("r", "z");
        assert_eq!(
            c.wait("z", Duration::from_secs(10), &|| true),
            CallEnd::Cancelled
        );
        assert!(!c.answer("r", "z", true, String::new()), "cancelled");
        c.open("r", "w");
        c.clear();
        assert!(!c.answer("r", "w", true, String::new()), "run ended");
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
