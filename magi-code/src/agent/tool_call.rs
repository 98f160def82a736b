//! One tool call of a run: policy, approval, execution, and its activity events and records.

use super::approvals::{Decision, APPROVAL_EXPIRY};
use super::emit::RunOutput;
use crate::config::Policy;
use crate::history::{ActivityKind, ActivityState, Body, Record};
use crate::tools::{self, ToolClass};
use crate::util::redact::{safe_name, sanitize_text};
use crate::util::text::bounded;
use protocol_core::limits::SUMMARY_BYTES;
use serde_json::{json, Value};

fn activity(
    out: &RunOutput<'_>,
    id: &str,
    state: ActivityState,
    name: &str,
    summary: &str,
) -> (Value, Record) {
    let event = json!({ "activity_id": id, "kind": "tool", "state": state.as_str(), "name": name, "summary": summary });
    let record = out.record(Body::Activity {
        run_id: out.run_id.clone(),
        activity_id: id.to_owned(),
        kind: ActivityKind::Tool,
        state,
        name: name.to_owned(),
        summary: Some(summary.to_owned()),
    });
    (event, record)
}

/// Runs one tool call, emitting `activity` (and `approval.requested`) events and adding its
/// records; returns the tool's output for the model, or `None` when refused.
pub fn call(
    out: &mut RunOutput<'_>,
    name: &str,
    input: &Value,
    records: &mut Vec<Record>,
) -> Option<String> {
    let ctx = out.ctx;
    let activity_id = format!("t-{}", uuid::Uuid::new_v4().simple());
    let shown = safe_name(name).unwrap_or_else(|| "tool".into());
    let described = bounded(&tools::describe(name, input), SUMMARY_BYTES);
    let (event, record) = activity(
        out,
        &activity_id,
        ActivityState::Started,
        &shown,
        &described,
    );
    out.critical("activity", event);
    records.push(record);
    let settings = &ctx.rt.settings;
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
            ctx.approvals.open(&out.run_id, &approval_id);
            out.critical(
                "approval.requested",
                json!({ "approval_id": approval_id, "summary": described, "expires_in_ms": protocol_core::limits::APPROVAL_EXPIRY_MS }),
            );
            let cancel = ctx.cancel;
            match ctx
                .approvals
                .wait(&approval_id, APPROVAL_EXPIRY, &|| cancel.is_cancelled())
            {
                Decision::Allowed => None,
                Decision::Denied => Some("approval denied"),
                Decision::Expired => Some("approval expired"),
                Decision::Cancelled => Some("cancelled"),
            }
        }
    };
    let (state, summary, output) = match refused {
        Some(why) => (ActivityState::Failed, format!("{described}: {why}"), None),
        None => {
            let o = tools::run(name, input, &ctx.rt.cwd, ctx.cancel);
            let state = if o.ok {
                ActivityState::Completed
            } else {
                ActivityState::Failed
            };
            (state, format!("{described}: {}", o.summary), Some(o.output))
        }
    };
    let summary = bounded(&sanitize_text(&summary), SUMMARY_BYTES);
    let (event, record) = activity(out, &activity_id, state, &shown, &summary);
    out.critical("activity", event);
    records.push(record);
    output
}
