//! The agent runner behind `turn.start`. This first cut runs the offline `scripted` provider
//! (`echo` and `script` text, sleeps, reasoning summaries and failures); HTTP providers,
//! tools and approvals arrive with the turns issue and are refused honestly until then.

use crate::backend::Shared;
use crate::cancel::Cancel;
use crate::redact::sanitize_text;
use crate::sessions::{self, SessionState};
use crate::startup::{fresh_revision, Runtime};
use crate::store::{self, now_ms, rfc3339};
use io_driver::EventSink;
use protocol_core::json::parse_strict;
use protocol_core::{ErrorCode, RequestId, WorkerEvent};
use serde_json::{json, Value};
use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

/// Largest text of one live event.
pub const LIVE_CHUNK_BYTES: usize = 4_000;
/// Authoritative assistant content per run.
pub const RUN_CONTENT_BYTES: usize = 8 << 20;
/// Assistant segments per run.
pub const RUN_CONTENT_SEGMENTS: usize = 512;
/// Largest script file read.
pub const SCRIPT_BYTES: u64 = 1 << 20;
/// How long a critical event may wait for room.
pub const CRITICAL_WAIT: Duration = Duration::from_millis(2_000);

/// One step of a scripted turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Streamed reply text.
    Text(String),
    /// A cancellable wait.
    Sleep(u64),
    /// The model calls a built-in tool through the normal policy and approval path.
    Tool {
        /// Tool name.
        name: String,
        /// Tool input.
        input: Value,
    },
    /// A provider reasoning summary.
    ReasoningSummary(String),
    /// The provider fails the run.
    Fail,
}

/// Loads `providers.scripted.script`: `{"turns":[{"steps":[...]}, ...]}`.
pub fn load_script(path: &str) -> Option<Vec<Vec<Step>>> {
    let held = store::read_held(std::path::Path::new(path), SCRIPT_BYTES, 100_000).ok()?;
    let (v, d) = parse_strict(&held.bytes).ok()?;
    if !d.top.is_empty() || d.nested {
        return None;
    }
    let turns = v
        .as_object()
        .filter(|o| o.len() == 1)?
        .get("turns")?
        .as_array()?;
    if turns.is_empty() {
        return None;
    }
    turns
        .iter()
        .map(|t| {
            let steps = t
                .as_object()
                .filter(|o| o.len() == 1)?
                .get("steps")?
                .as_array()?;
            steps
                .iter()
                .map(|s| {
                    let o = s.as_object().filter(|o| o.len() == 1)?;
                    let (k, v) = o.iter().next()?;
                    Some(match k.as_str() {
                        "text" => Step::Text(v.as_str()?.to_owned()),
                        "sleep_ms" => Step::Sleep(v.as_u64().filter(|ms| *ms <= 600_000)?),
                        "tool" => {
                            let t = v.as_object()?;
                            if t.keys().any(|k| k != "name" && k != "input") {
                                return None;
                            }
                            Step::Tool {
                                name: t.get("name")?.as_str()?.to_owned(),
                                input: t.get("input").cloned().unwrap_or_else(|| json!({})),
                            }
                        }
                        "reasoning_summary" => Step::ReasoningSummary(v.as_str()?.to_owned()),
                        "fail" => {
                            v.as_str()?;
                            Step::Fail
                        }
                        _ => return None,
                    })
                })
                .collect()
        })
        .collect()
}

/// Splits text into live chunks of at most `max` bytes at character boundaries, aiming for
/// `pieces` chunks.
#[must_use]
pub fn live_chunks(text: &str, pieces: usize, max: usize) -> Vec<&str> {
    let target = (text.len() / pieces.max(1)).clamp(1, max);
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + target).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == start {
            end = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// One run in progress.
pub struct Run<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) rt: &'a Runtime,
    pub(crate) sink: &'a EventSink,
    pub(crate) cancel: &'a Cancel,
    pub(crate) session_id: String,
    pub(crate) run_id: String,
    /// Critical delivery failed: the run ends with `output_unavailable`.
    output_lost: bool,
}

impl Run<'_> {
    fn state(&self) -> MutexGuard<'_, SessionState> {
        self.shared
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn data(&self, mut fields: Value) -> Value {
        if let Some(o) = fields.as_object_mut() {
            o.insert("session_id".into(), json!(self.session_id));
            o.insert("run_id".into(), json!(self.run_id));
        }
        fields
    }

    pub(crate) fn critical(&mut self, name: &str, fields: Value) {
        if self.output_lost {
            return;
        }
        let ev = WorkerEvent::RunEvent {
            run_id: self.run_id.clone(),
            name: name.into(),
            data: self.data(fields),
            critical: true,
        };
        if !self.sink.send_timeout(ev, CRITICAL_WAIT) {
            self.output_lost = true;
            self.cancel.cancel();
        }
    }

    fn delta(&self, message_id: &str, part: usize, text: &str) {
        let data = self.data(json!({ "message_id": message_id, "part": part, "text": text }));
        let _ = self.sink.try_send(WorkerEvent::RunEvent {
            run_id: self.run_id.clone(),
            name: "message.delta".into(),
            data,
            critical: false,
        });
    }

    pub(crate) fn record(&self, kind: &str, mut fields: Value) -> Value {
        if let Some(o) = fields.as_object_mut() {
            o.insert("type".into(), json!(kind));
            o.insert("session_id".into(), json!(self.session_id));
            o.insert("ts".into(), json!(rfc3339(now_ms())));
            o.insert("run_id".into(), json!(self.run_id));
        }
        fields
    }

    fn append(&self, records: &[Value]) -> Result<(), ErrorCode> {
        let mut st = self.state();
        let a = st.attachment.as_mut().ok_or(ErrorCode::PersistenceFailed)?;
        sessions::append(self.rt, a, records)
    }
}

/// Admission of a turn: checks, then `TurnAdmitted`; runs it to `RunFinished` on this thread.
pub fn run_turn(
    shared: &Shared,
    sink: &EventSink,
    cancel: &Cancel,
    id: RequestId,
    session_id: String,
    prompt: String,
) {
    let rt = shared
        .runtime
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let Some(rt) = rt else {
        sink.send(WorkerEvent::TurnRejected {
            id,
            code: ErrorCode::StartupFailed,
        });
        return;
    };
    let (selection, turns) = {
        let st = shared
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &st.attachment {
            Some(a) if a.id.as_str() == session_id => (st.selection.clone(), a.turns),
            Some(_) => {
                sink.send(WorkerEvent::TurnRejected {
                    id,
                    code: ErrorCode::StaleSession,
                });
                return;
            }
            None => {
                sink.send(WorkerEvent::TurnRejected {
                    id,
                    code: ErrorCode::SessionMissing,
                });
                return;
            }
        }
    };
    let selection = selection.unwrap_or_else(|| sessions::Selection::startup(&rt));
    let mut http = None;
    let steps = match (selection.provider.as_str(), selection.model.as_str()) {
        ("scripted", "echo") => vec![Step::Text(prompt.clone())],
        ("scripted", "script") => {
            let Some(script) = rt.settings.scripted_script.as_deref().and_then(load_script) else {
                sink.send(WorkerEvent::TurnRejected {
                    id,
                    code: ErrorCode::ExecutionFailed,
                });
                return;
            };
            script[turns % script.len()].clone()
        }
        (provider, model) => match crate::providers::target(&rt, provider, model) {
            Some(t) => {
                http = Some((t, conversation(shared)));
                Vec::new()
            }
            None => {
                sink.send(WorkerEvent::TurnRejected {
                    id,
                    code: ErrorCode::ProviderUnavailable,
                });
                return;
            }
        },
    };
    if cancel.is_cancelled() {
        sink.send(WorkerEvent::TurnRejected {
            id,
            code: ErrorCode::OperationCancelled,
        });
        return;
    }
    let run_id = uuid::Uuid::new_v4().hyphenated().to_string();
    sink.send(WorkerEvent::TurnAdmitted {
        id,
        run_id: run_id.clone(),
    });
    let mut run = Run {
        shared,
        rt: &rt,
        sink,
        cancel,
        session_id,
        run_id,
        output_lost: false,
    };
    let echo = selection.provider == "scripted" && selection.model == "echo";
    // A panic after admission must still end the run with its terminal event, or the engine
    // would keep the run active: report it as a failed run whose persistence is unknown.
    let data = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        execute(&mut run, &prompt, &steps, echo, http.as_ref())
    }))
    .unwrap_or_else(|_| {
        json!({ "outcome": "failed", "persistence": "degraded", "revision": null, "error_code": ErrorCode::ExecutionFailed.as_str() })
    });
    // Late answers to this run's approvals are stale from now on.
    shared.approvals.clear();
    let view = {
        let st = run.state();
        Some(sessions::view(&rt, &st))
    };
    sink.send_timeout(
        WorkerEvent::RunFinished {
            run_id: run.run_id.clone(),
            data: run.data(data),
            view,
        },
        CRITICAL_WAIT,
    );
}

/// An HTTP provider target and the earlier conversation (role, text).
type Http = (crate::providers::Target, Vec<(&'static str, String)>);

/// The earlier user/assistant turns of the attachment, from its current snapshot.
fn conversation(shared: &Shared) -> Vec<(&'static str, String)> {
    let st = shared
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let Some(a) = &st.attachment else {
        return Vec::new();
    };
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut last_id = String::new();
    for e in &a.snapshot.projection.entries {
        let Ok(v) = serde_json::from_str::<Value>(e) else {
            continue;
        };
        let role = match v["kind"].as_str() {
            Some("user") => "user",
            Some("assistant") => "assistant",
            _ => continue,
        };
        let id = v["message_id"].as_str().unwrap_or_default();
        let text = v["text"].as_str().unwrap_or_default();
        match out.last_mut() {
            Some((r, t)) if id == last_id && *r == role => t.push_str(text),
            _ => out.push((role, text.to_owned())),
        }
        last_id = id.to_owned();
    }
    out
}

/// One assistant segment: text between tool calls, with its own message ID.
struct Segment {
    id: String,
    text: String,
    part: usize,
}

impl Segment {
    fn new() -> Self {
        Self {
            id: format!("a-{}", uuid::Uuid::new_v4().simple()),
            text: String::new(),
            part: 0,
        }
    }
}

/// Reconciles a finished segment (authoritative parts) and records it.
fn close_segment(run: &mut Run<'_>, seg: &mut Segment, partial: bool, records: &mut Vec<Value>) {
    if seg.text.is_empty() {
        return;
    }
    let parts = live_chunks(&seg.text, 1, LIVE_CHUNK_BYTES);
    let last = parts.len() - 1;
    for (i, p) in parts.iter().enumerate() {
        run.critical(
            "message.reconcile",
            json!({ "message_id": seg.id, "part": i, "text": p, "last_part": i == last, "partial": partial }),
        );
    }
    records.push(run.record(
        "assistant_message",
        json!({ "message_id": seg.id, "text": seg.text }),
    ));
    *seg = Segment::new();
}

fn execute(
    run: &mut Run<'_>,
    prompt: &str,
    steps: &[Step],
    echo: bool,
    http: Option<&Http>,
) -> Value {
    let finished = |outcome: &str,
                    persistence: &str,
                    revision: Option<String>,
                    code: Option<ErrorCode>| {
        json!({ "outcome": outcome, "persistence": persistence, "revision": revision, "error_code": code.map(ErrorCode::as_str) })
    };
    // Required input first: durable before any provider work.
    let input_id = format!("u-{}", uuid::Uuid::new_v4().simple());
    let user = run.record(
        "user_input",
        json!({ "message_id": input_id, "text": prompt }),
    );
    if let Err(code) = run.append(&[user]) {
        return finished("failed", "not_started", None, Some(code));
    }
    let input_revision = fresh_revision();
    run.critical(
        "input.persisted",
        json!({ "message_id": input_id, "durable": true, "revision": input_revision }),
    );

    let mut seg = Segment::new();
    let mut content = 0usize;
    let mut segments = 0usize;
    let mut records = Vec::new();
    let mut failure: Option<ErrorCode> = None;
    if let Some((target, history)) = http {
        let mut messages: Vec<(&str, String)> =
            history.iter().map(|(r, t)| (*r, t.clone())).collect();
        messages.push(("user", prompt.to_owned()));
        let mut over = false;
        let streamed = crate::providers::stream(target, &messages, run.cancel, &mut |chunk| {
            let t = sanitize_text(chunk);
            if content + t.len() > RUN_CONTENT_BYTES {
                over = true;
                return false;
            }
            for c in live_chunks(&t, 1, LIVE_CHUNK_BYTES) {
                run.delta(&seg.id, seg.part, c);
                seg.part += 1;
            }
            content += t.len();
            seg.text.push_str(&t);
            true
        });
        if over {
            failure = Some(ErrorCode::ContentLimit);
        } else if matches!(streamed, Err(e) if e != crate::providers::ProviderError::Cancelled) {
            failure = Some(ErrorCode::ExecutionFailed);
        }
    }
    for step in steps {
        if run.cancel.is_cancelled() {
            break;
        }
        match step {
            Step::Text(t) => {
                let t = sanitize_text(t);
                if content + t.len() > RUN_CONTENT_BYTES
                    || (seg.text.is_empty() && segments >= RUN_CONTENT_SEGMENTS)
                {
                    failure = Some(ErrorCode::ContentLimit);
                    break;
                }
                if seg.text.is_empty() {
                    segments += 1;
                }
                for chunk in live_chunks(&t, if echo { 3 } else { 1 }, LIVE_CHUNK_BYTES) {
                    run.delta(&seg.id, seg.part, chunk);
                    seg.part += 1;
                }
                content += t.len();
                seg.text.push_str(&t);
            }
            Step::Sleep(ms) => {
                run.cancel.sleep(Duration::from_millis(*ms));
            }
            Step::ReasoningSummary(s) => {
                records.push(run.record(
                    "reasoning_summary",
                    json!({ "item_id": format!("rs{}", records.len()), "text": s, "provider_summary": true }),
                ));
            }
            Step::Tool { name, input } => {
                // Tool calls separate assistant segments.
                close_segment(run, &mut seg, false, &mut records);
                crate::toolcall::call(run, name, input, &mut records);
            }
            Step::Fail => {
                failure = Some(ErrorCode::ExecutionFailed);
                break;
            }
        }
    }
    let cancelled = run.cancel.is_cancelled() && failure.is_none();
    let complete = failure.is_none() && !cancelled;
    close_segment(run, &mut seg, !complete, &mut records);
    let (outcome, code) = if run.output_lost {
        ("failed", Some(ErrorCode::OutputUnavailable))
    } else if let Some(c) = failure {
        ("failed", Some(c))
    } else if cancelled {
        ("cancelled", None)
    } else {
        ("completed", None)
    };
    records.push(run.record(
        "run_finished",
        json!({ "outcome": outcome, "error_code": code.map(ErrorCode::as_str) }),
    ));
    if run.append(&records).is_err() {
        return finished(
            outcome,
            "degraded",
            None,
            code.or(Some(ErrorCode::PersistenceFailed)),
        );
    }
    let revision = {
        let mut st = run.state();
        st.attachment
            .as_mut()
            .and_then(|a| sessions::refresh(run.rt, a, &Cancel::default()).ok())
    };
    // Every append succeeded: durable, even if the projection cannot be rebuilt (then the
    // revision is null and the client reopens explicitly).
    finished(outcome, "durable", revision, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_bounded_and_whole() {
        let t = "é".repeat(5_000);
        let c = live_chunks(&t, 3, LIVE_CHUNK_BYTES);
        assert!(c.len() >= 3);
        assert!(c.iter().all(|p| p.len() <= LIVE_CHUNK_BYTES));
        assert_eq!(c.concat(), t);
        assert_eq!(live_chunks("hi", 3, 4000), ["h", "i"]);
        // The live chunk bound at its edge: 4,000 bytes is one chunk, 4,001 two.
        assert_eq!(
            live_chunks(&"a".repeat(LIVE_CHUNK_BYTES), 1, LIVE_CHUNK_BYTES).len(),
            1
        );
        assert_eq!(
            live_chunks(&"a".repeat(LIVE_CHUNK_BYTES + 1), 1, LIVE_CHUNK_BYTES).len(),
            2
        );
        assert!(live_chunks("", 3, 4000).is_empty());
    }
}
