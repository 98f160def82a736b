//! The body of one admitted run: the durable input, the provider's stream or the script's
//! steps, tool calls between segments, and the durable terminal records.

use super::emit::RunOutput;
use super::outcome::{Finished, Persistence, RunOutcome};
use super::segment::{close_segment, Segment};
use crate::history::Body;
use crate::providers::{self, ProviderError, Step, Target};
use crate::session;
use crate::util::cancel::Cancel;
use crate::util::ids::fresh_revision;
use crate::util::redact::sanitize_text;
use protocol_core::limits::{RUN_CONTENT_BYTES, RUN_CONTENT_SEGMENTS};
use protocol_core::ErrorCode;
use serde_json::json;
use std::time::Duration;

/// An HTTP provider target and the earlier conversation (role, text).
pub type Http = (Target, Vec<(&'static str, String)>);

/// Runs an admitted turn to its terminal facts.
pub fn execute(
    out: &mut RunOutput<'_>,
    prompt: &str,
    steps: &[Step],
    echo: bool,
    http: Option<&Http>,
) -> Finished {
    let finished = |outcome, persistence, revision, error_code| Finished {
        outcome,
        persistence,
        revision,
        error_code,
    };
    let cancel = out.ctx.cancel;
    // Required input first: durable before any provider work.
    let input_id = format!("u-{}", uuid::Uuid::new_v4().simple());
    let user = out.record(Body::UserInput {
        run_id: out.run_id.clone(),
        message_id: Some(input_id.clone()),
        text: prompt.to_owned(),
    });
    if let Err(code) = out.append(&[user]) {
        return finished(
            RunOutcome::Failed,
            Persistence::NotStarted,
            None,
            Some(code),
        );
    }
    let input_revision = fresh_revision();
    out.critical(
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
        let streamed = providers::stream(target, &messages, cancel, &mut |chunk| {
            let t = sanitize_text(chunk);
            if content + t.len() > RUN_CONTENT_BYTES {
                over = true;
                return false;
            }
            content += t.len();
            seg.stream(out, &t, 1);
            true
        });
        if over {
            failure = Some(ErrorCode::ContentLimit);
        } else if matches!(streamed, Err(e) if e != ProviderError::Cancelled) {
            failure = Some(ErrorCode::ExecutionFailed);
        }
    }
    for step in steps {
        if cancel.is_cancelled() {
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
                content += t.len();
                seg.stream(out, &t, if echo { 3 } else { 1 });
            }
            Step::Sleep(ms) => {
                cancel.sleep(Duration::from_millis(*ms));
            }
            Step::ReasoningSummary(s) => {
                records.push(out.record(Body::ReasoningSummary {
                    run_id: out.run_id.clone(),
                    text: s.clone(),
                    item_id: Some(format!("rs{}", records.len())),
                    provider_summary: Some(true),
                }));
            }
            Step::Tool { name, input } => {
                // Tool calls separate assistant segments.
                close_segment(out, &mut seg, false, &mut records);
                super::tool_call::call(out, name, input, &mut records);
            }
            Step::Fail => {
                failure = Some(ErrorCode::ExecutionFailed);
                break;
            }
        }
    }
    let cancelled = cancel.is_cancelled() && failure.is_none();
    let complete = failure.is_none() && !cancelled;
    close_segment(out, &mut seg, !complete, &mut records);
    let (outcome, code) = if out.output_lost {
        (RunOutcome::Failed, Some(ErrorCode::OutputUnavailable))
    } else if let Some(c) = failure {
        (RunOutcome::Failed, Some(c))
    } else if cancelled {
        (RunOutcome::Cancelled, None)
    } else {
        (RunOutcome::Completed, None)
    };
    records.push(out.record(Body::RunFinished {
        run_id: out.run_id.clone(),
        outcome,
        error_code: code.map(|c| c.as_str().to_owned()),
    }));
    if out.append(&records).is_err() {
        return finished(
            outcome,
            Persistence::Degraded,
            None,
            code.or(Some(ErrorCode::PersistenceFailed)),
        );
    }
    let revision = {
        let mut st = out.ctx.state();
        st.attachment
            .as_mut()
            .and_then(|a| session::refresh(&out.ctx.rt, a, &Cancel::default()).ok())
    };
    // Every append succeeded: durable, even if the projection cannot be rebuilt (then the
    // revision is null and the client reopens explicitly).
    finished(outcome, Persistence::Durable, revision, code)
}
