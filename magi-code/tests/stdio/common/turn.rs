//! Running turns on a child and reading their frames, and the settings that point a child at
//! the fake model server as the configured Chat provider `local`.

use super::fake_llm::FakeLlm;
use super::frames::result;
use super::server::{Env, Server};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sends `turn.start` for `sid` under a fresh request ID (IDs are never reused within a
/// child); asserts it was admitted and returns its run ID.
#[track_caller]
pub fn start_turn(s: &mut Server, sid: &str, prompt: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let id = format!("turn-{}", N.fetch_add(1, Ordering::Relaxed));
    let r = s.call(
        &id,
        "turn.start",
        &json!({"session_id": sid, "prompt": prompt}),
    );
    result(&r)["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("turn.start gave no run ID: {r}"))
        .to_owned()
}

/// Reads frames until one matches `pred`; returns it and everything before.
pub fn until_match(s: &mut Server, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
    let mut seen = Vec::new();
    loop {
        let f = s.next();
        if pred(&f) {
            return (f, seen);
        }
        seen.push(f);
    }
}

/// A predicate: the frame is the event `name`.
pub fn is_event(name: &'static str) -> impl Fn(&Value) -> bool {
    move |f: &Value| f["event"] == name
}

/// Frames up to and including `run.finished`.
pub fn until_finished(s: &mut Server) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let f = s.next();
        let done = f["event"] == "run.finished";
        frames.push(f);
        if done {
            return frames;
        }
    }
}

/// [`start_turn`], then [`until_finished`].
#[track_caller]
pub fn run_turn(s: &mut Server, sid: &str, prompt: &str) -> Vec<Value> {
    start_turn(s, sid, prompt);
    until_finished(s)
}

/// Reads frames up to the next `approval.requested` and answers it with `allow` (request ID
/// `a`); the frames read, that request last.
pub fn answer_next_approval(s: &mut Server, sid: &str, run_id: &str, allow: bool) -> Vec<Value> {
    let mut seen = Vec::new();
    let asked = loop {
        let f = s.next();
        seen.push(f.clone());
        if f["event"] == "approval.requested" {
            break f;
        }
    };
    let r = s.call(
        "a",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id,
            "approval_id": asked["data"]["approval_id"], "allow": allow}),
    );
    assert_eq!(result(&r)["recorded"], true);
    seen
}

/// Sends `turn.cancel` for `run_id` (request ID `x`), then [`until_finished`]; the frames and
/// how long after the request `run.finished` came.
pub fn cancel_turn(s: &mut Server, sid: &str, run_id: &str) -> (Vec<Value>, Duration) {
    let t0 = Instant::now();
    s.request(
        "x",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let frames = until_finished(s);
    (frames, t0.elapsed())
}

/// The `outcome` of the `run.finished` that ends `frames`.
pub fn outcome(frames: &[Value]) -> &Value {
    &frames.last().expect("no frames")["data"]["outcome"]
}

/// The event frames named `name`.
pub fn events<'a>(frames: &'a [Value], name: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["event"] == name).collect()
}

/// The text of every `message.reconcile`, joined.
pub fn reconciled(frames: &[Value]) -> String {
    events(frames, "message.reconcile")
        .iter()
        .map(|f| f["data"]["text"].as_str().unwrap())
        .collect()
}

/// The codes of every `diagnostic`, in order.
pub fn diagnostic_codes(frames: &[Value]) -> Vec<String> {
    events(frames, "diagnostic")
        .iter()
        .map(|f| f["data"]["code"].as_str().unwrap().to_owned())
        .collect()
}

/// Global settings selecting the configured Chat provider `local` (model `tiny`) at `llm`,
/// with `extra` merged in (objects key by key, anything else replaced).
pub fn fake_llm_settings(llm: &FakeLlm, extra: &Value) -> Value {
    let mut settings = json!({
        "provider": "local", "model": "tiny",
        "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{}/v1", llm.base)}},
    });
    merge(&mut settings, extra);
    settings
}

fn merge(into: &mut Value, extra: &Value) {
    match (into, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

impl Env {
    /// Writes [`fake_llm_settings`] as the global settings.
    pub fn use_fake_llm(&self, llm: &FakeLlm, extra: &Value) {
        self.write_global_settings(&fake_llm_settings(llm, extra));
    }
}

/// A fresh [`Env`] using the fake model with `extra` settings.
pub fn fake_llm_env(llm: &FakeLlm, extra: &Value) -> Env {
    let env = Env::new();
    env.use_fake_llm(llm, extra);
    env
}
