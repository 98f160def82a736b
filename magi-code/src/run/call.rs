//! One tool call's activities and cards (`started` and final), the policy that applies to it
//! and what the model gets back: the frames of a call, built from the wire types.

use crate::codemode::text::ToolErrorCode;
use crate::config::Policy;
use crate::history::{ActivityKind, ActivityState, Body};
use crate::tools::outcome::bound_output;
use crate::tools::{Card, CardStatus, ToolClass, ToolKind, ToolOutcome};
use crate::util::redact::{redact_loaded, safe_name, sanitize_text};
use crate::util::text::{bounded, tail};
use crate::wire::events::{ToolCardData, ToolOutputData};
use crate::wire::{self, Event};
use protocol_core::limits::{SUMMARY_BYTES, TOOL_TAIL_BYTES, TOOL_TAIL_LINES};
use serde_json::Value;

use super::shared::Shared;

/// What the model gets back for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRun {
    /// The bounded output, or a fixed short text saying why the call did not run.
    pub output: String,
    /// Whether the call failed, was refused or was cut short.
    pub is_error: bool,
    /// Why, as a nested call's `ToolError` code (`None` when it succeeded).
    pub code: Option<ToolErrorCode>,
}

/// A call with its `started` activity out, on its way through policy, approval and hooks.
#[derive(Debug)]
pub struct Prepared {
    pub name: String,
    pub input: Value,
    pub kind: Option<ToolKind>,
    pub activity_id: String,
    pub shown: String,
    pub described: String,
    pub card: Card,
    /// Why it must not run, if so: the error result's text.
    pub refused: Option<String>,
    /// The refusal's `ToolError` code, for a nested call.
    pub refused_code: Option<ToolErrorCode>,
    /// A `post_tool` hook applies to it.
    pub post: bool,
}

impl Prepared {
    /// Refuses the call: `why` is its error result, `code` what a nested call throws.
    pub fn refuse(&mut self, why: &str, code: ToolErrorCode) {
        self.refused = Some(why.to_owned());
        self.refused_code = Some(code);
    }
}

/// What a call gets when the run was cancelled before it started.
pub fn cancelled_run() -> ToolRun {
    ToolRun {
        output: "cancelled: the call did not run".to_owned(),
        is_error: true,
        code: Some(ToolErrorCode::Cancelled),
    }
}

/// What a call gets when the run's activity bound leaves it no room: it does not run.
pub fn over_activities() -> ToolRun {
    ToolRun {
        output: "refused: the turn reached its bound of tool activities".to_owned(),
        is_error: true,
        code: Some(ToolErrorCode::Limit),
    }
}

/// The policy of the tool's class; the run's table holds only what it offers (for a
/// subagent, its own tool list, never `task`). A `nested` call (made from code) reads
/// `code_mode.tools`, never the direct policies, and may not call `exec`.
pub fn policy(sh: &Shared, name: &str, nested: bool) -> Option<Policy> {
    let class = sh.cfg.tools.class(name)?;
    if nested {
        let p = sh.cfg.code.as_ref().map(|c| c.policies).unwrap_or_default();
        return Some(match class {
            ToolClass::Read => p.read,
            ToolClass::Write => p.write,
            ToolClass::Shell => p.shell,
            ToolClass::Client => p.client,
            ToolClass::Mcp => p.mcp,
            ToolClass::Task => p.task,
            ToolClass::Code => Policy::Deny,
        });
    }
    let p = sh.cfg.policies;
    Some(match class {
        ToolClass::Read => p.read,
        ToolClass::Write => p.write,
        ToolClass::Shell => p.shell,
        ToolClass::Client => p.client,
        ToolClass::Mcp => p.mcp,
        ToolClass::Task => p.task,
        ToolClass::Code => p.code,
    })
}

/// The `started` activity and card of a call, not yet refused; a `nested` call's summary
/// (activities and approval) starts `code: `.
pub fn start_call(sh: &mut Shared, name: String, input: Value, nested: bool) -> Prepared {
    let activity_id = sh.voice.fresh_id("t-");
    let shown = safe_name(&name).unwrap_or_else(|| "tool".into());
    let kind = sh.cfg.tools.lookup(&name);
    let client = kind == Some(ToolKind::Client);
    let described = if client {
        // The client's tool: its name is the description (the input is the client's).
        shown.clone()
    } else {
        bounded(&sh.cfg.tools.summary(&name, &input), SUMMARY_BYTES)
    };
    let described = if nested {
        bounded(&format!("code: {described}"), SUMMARY_BYTES)
    } else {
        described
    };
    let started = if kind == Some(ToolKind::Task) {
        format!("{described}: running")
    } else {
        described.clone()
    };
    call_activity(
        sh,
        &activity_id,
        kind,
        ActivityState::Started,
        &shown,
        &started,
    );
    // Client tools (`client.tools`) get `Card::client`; every other name is classified.
    let shown_card = if client {
        Card::client(&name)
    } else {
        Card::new(&name, &input, &sh.cfg.cwd)
    };
    card(
        sh,
        &activity_id,
        shown_card.render(CardStatus::Running, None),
    );
    Prepared {
        name,
        input,
        kind,
        activity_id,
        shown,
        described,
        card: shown_card,
        refused: None,
        refused_code: None,
        post: false,
    }
}

pub fn call_activity(
    sh: &mut Shared,
    id: &str,
    kind: Option<ToolKind>,
    state: ActivityState,
    shown: &str,
    summary: &str,
) {
    // `task` calls are the `subagent` activity (`decisions.md` 33).
    let kind = if kind == Some(ToolKind::Task) {
        ActivityKind::Subagent
    } else {
        ActivityKind::Tool
    };
    let (event, record) = sh.voice.activity(id, kind, state, shown, summary);
    sh.voice.critical(event);
    sh.records.push(record);
}

/// Stores the activity's card after its record and, when the client negotiated
/// `tool.cards`, sends it as a `tool.card` event right after the `activity` event.
pub fn card(sh: &mut Shared, id: &str, card: wire::tool_cards::Card) {
    // The record stores the card as the event sends it: serialized through `Value`.
    let stored = wire::body(&card);
    if sh.cfg.tool_cards {
        let (session_id, run_id) = sh.voice.ids();
        sh.voice.critical(Event::ToolCard(ToolCardData {
            session_id,
            run_id,
            activity_id: id.to_owned(),
            card,
        }));
    }
    let record = sh.voice.record(Body::ToolCard {
        run_id: sh.cfg.run_id.clone(),
        activity_id: id.to_owned(),
        card: stored,
    });
    sh.records.push(record);
}

/// Emits the call's final activity and card for what the tool produced (`None` when it
/// did not run) and returns what the model gets back.
pub fn complete(sh: &mut Shared, mut p: Prepared, outcome: Option<ToolOutcome>) -> ToolRun {
    let described = p.described.clone();
    let ran = outcome.as_ref().filter(|_| p.refused.is_none());
    let status = match ran {
        Some(o) if o.ok => CardStatus::Completed,
        _ => CardStatus::Failed,
    };
    let shown_card = p.card.render(status, ran);
    let ran = ran.is_some();
    let (state, summary, run) = match (p.refused.take(), outcome) {
        (None, Some(o)) => {
            let state = if o.ok {
                ActivityState::Completed
            } else {
                ActivityState::Failed
            };
            // A failure's summary (`exit 3`, `not found`) heads the output unless it
            // already does: Chat and Responses results carry no error flag.
            let output = if o.ok || o.output.starts_with(&o.summary) {
                o.output
            } else {
                bound_output(format!("{}\n{}", o.summary, o.output), false)
            };
            // A nested call cut short by its cell's interrupt ran but was cancelled.
            let failed = if sh.cancelled {
                ToolErrorCode::Cancelled
            } else {
                ToolErrorCode::Failed
            };
            let run = ToolRun {
                output,
                is_error: !o.ok,
                code: (!o.ok).then_some(failed),
            };
            (state, format!("{described}: {}", o.summary), run)
        }
        (why, _) => {
            let code = p.refused_code.unwrap_or(ToolErrorCode::Cancelled);
            let why = why.unwrap_or_else(|| "cancelled".to_owned());
            let summary = format!("{described}: {why}");
            let run = ToolRun {
                output: why,
                is_error: true,
                code: Some(code),
            };
            (ActivityState::Failed, summary, run)
        }
    };
    // `exec`'s started and final activities carry the same `exec: N lines` summary.
    let summary = if p.kind == Some(ToolKind::Code) {
        described
    } else {
        summary
    };
    let summary = bounded(&sanitize_text(&summary), SUMMARY_BYTES);
    call_activity(sh, &p.activity_id, p.kind, state, &p.shown, &summary);
    card(sh, &p.activity_id, shown_card);
    // The one way every output reaches a record, the model or a cell: no loaded key or
    // token value passes (`backend.md` "Tools and approvals").
    let run = ToolRun {
        output: redact_loaded(run.output),
        ..run
    };
    if ran && p.kind != Some(ToolKind::Code) {
        output_tail(sh, &p.activity_id, &run.output);
    }
    run
}

/// With `tool.details`, the `tool.output` event of a call that ran: the end of what the
/// model got (an `exec` cell's nested calls have their own).
fn output_tail(sh: &mut Shared, id: &str, output: &str) {
    if !sh.cfg.tool_details || output.trim().is_empty() {
        return;
    }
    let clean = sanitize_text(output);
    let tail = tail(&clean, TOOL_TAIL_LINES, TOOL_TAIL_BYTES).to_owned();
    let (session_id, run_id) = sh.voice.ids();
    sh.voice.critical(Event::ToolOutput(ToolOutputData {
        session_id,
        run_id,
        activity_id: id.to_owned(),
        tail,
        lines: output.lines().count() as u64,
        bytes: output.len() as u64,
    }));
}
