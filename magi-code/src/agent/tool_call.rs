//! One tool call of a run: policy, approval, execution, and its activity events and records.

use super::approvals::{Decision, APPROVAL_EXPIRY};
use super::client_tool;
use super::emit::RunOutput;
use super::subagent;
use crate::config::Policy;
use crate::history::{ActivityKind, ActivityState, Body, Record};
use crate::mcp::{Lost, McpHub};
use crate::tools::outcome::bound_output;
use crate::tools::{self, Card, CardStatus, ToolClass, ToolKind, ToolOutcome};
use crate::util::redact::{safe_name, sanitize_text};
use crate::util::text::bounded;
use crate::wire::events::{ApprovalRequestedData, ToolCardData};
use crate::wire::{self, DiagnosticCode, Event};
use protocol_core::limits::SUMMARY_BYTES;
use serde_json::Value;

fn activity(
    out: &RunOutput<'_>,
    id: &str,
    state: ActivityState,
    name: &str,
    summary: &str,
) -> (Event, Record) {
    // `task` calls are the `subagent` activity (`decisions.md` 33).
    let kind = if out.tools.lookup(name) == Some(ToolKind::Task) {
        ActivityKind::Subagent
    } else {
        ActivityKind::Tool
    };
    let event = out.activity_event(id, kind, state, name, summary);
    let record = out.record(Body::Activity {
        run_id: out.run_id.clone(),
        activity_id: id.to_owned(),
        kind,
        state,
        name: name.to_owned(),
        summary: Some(summary.to_owned()),
    });
    (event, record)
}

/// Stores the activity's card after its record and, when the client negotiated `tool.cards`,
/// sends it as a `tool.card` event right after the `activity` event.
fn card(
    out: &mut RunOutput<'_>,
    id: &str,
    card: wire::tool_cards::Card,
    records: &mut Vec<Record>,
) {
    // The record stores the card as the event sends it: serialized through `Value`.
    let stored = wire::body(&card);
    if out.ctx.rt.tool_cards {
        let (session_id, run_id) = out.ids();
        out.critical(Event::ToolCard(ToolCardData {
            session_id,
            run_id,
            activity_id: id.to_owned(),
            card,
        }));
    }
    records.push(out.record(Body::ToolCard {
        run_id: out.run_id.clone(),
        activity_id: id.to_owned(),
        card: stored,
    }));
}

/// What the model gets back for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRun {
    /// The bounded output, or a fixed short text saying why the call did not run.
    pub output: String,
    /// Whether the call failed, was refused or was cut short.
    pub is_error: bool,
}

/// A call past its policy and approval, its `started` activity emitted.
#[derive(Debug)]
pub struct Prepared {
    activity_id: String,
    shown: String,
    described: String,
    card: Card,
    /// Why it must not run, if so: the error result's text.
    refused: Option<String>,
    /// The call's name and input, kept only when a `post_tool` hook applies to it.
    post: Option<(String, Value)>,
}

impl Prepared {
    /// Whether the tool may run.
    #[must_use]
    pub fn may_run(&self) -> bool {
        self.refused.is_none()
    }
}

/// Whether a call runs without asking: a read-class built-in whose policy is `allow`, with an
/// object input. Such calls may run concurrently.
#[must_use]
pub fn runs_unasked(out: &RunOutput<'_>, name: &str, input: &Value) -> bool {
    out.tools.class(name) == Some(ToolClass::Read)
        && out.ctx.rt.settings.tool_read == Policy::Allow
        && input.is_object()
}

/// Emits the call's `started` activity, checks the input against the tool's schema, then
/// applies its policy, asking for approval when it says `ask`, then its `pre_tool` hooks.
/// Refusals (a tool the run does not offer, input that is not an object or breaks the schema,
/// policy, a denied or expired approval, a blocking hook, cancellation) mean the tool never
/// runs; input refused by its schema is never shown to an approval or a hook.
pub fn prepare(
    out: &mut RunOutput<'_>,
    name: &str,
    input: &Value,
    records: &mut Vec<Record>,
) -> Prepared {
    let mut p = start(out, name, input, records);
    p.refused = out.tools.check(name, input).err();
    if p.refused.is_none() {
        p.refused = policy_and_approval(out, name, &p.described).map(Into::into);
    }
    if p.refused.is_none() {
        p.refused = super::hooks::pre_tool(out, name, input).map(Into::into);
    }
    if p.refused.is_none() && super::hooks::has_post(out, name) {
        p.post = Some((name.to_owned(), input.clone()));
    }
    p
}

/// Emits a call's `started` activity and card and answers it with `why` without running it
/// (a repeated call, `runner.md` 7).
pub fn refuse(
    out: &mut RunOutput<'_>,
    name: &str,
    input: &Value,
    why: &'static str,
    records: &mut Vec<Record>,
) -> ToolRun {
    let mut p = start(out, name, input, records);
    p.refused = Some(why.to_owned());
    complete(out, p, None, records)
}

/// The `started` activity and card of a call, not yet refused.
fn start(
    out: &mut RunOutput<'_>,
    name: &str,
    input: &Value,
    records: &mut Vec<Record>,
) -> Prepared {
    let ctx = out.ctx;
    let activity_id = format!("t-{}", uuid::Uuid::new_v4().simple());
    let shown = safe_name(name).unwrap_or_else(|| "tool".into());
    let kind = out.tools.lookup(name);
    let client = kind == Some(ToolKind::Client);
    let described = if client {
        // The client's tool: its name is the description (the input is the client's).
        shown.clone()
    } else {
        bounded(&out.tools.summary(name, input), SUMMARY_BYTES)
    };
    let started = if kind == Some(ToolKind::Task) {
        subagent::started(&described)
    } else {
        described.clone()
    };
    let (event, record) = activity(out, &activity_id, ActivityState::Started, &shown, &started);
    out.critical(event);
    records.push(record);
    // Client tools (`client.tools`) get `Card::client`; every other name is classified here.
    let shown_card = if client {
        Card::client(name)
    } else {
        Card::new(name, input, &ctx.rt.cwd)
    };
    card(
        out,
        &activity_id,
        shown_card.render(CardStatus::Running, None),
        records,
    );
    Prepared {
        activity_id,
        shown,
        described,
        card: shown_card,
        refused: None,
        post: None,
    }
}

/// Why policy or the user's answer refuses a call whose input its schema accepted, if either
/// does.
fn policy_and_approval(
    out: &mut RunOutput<'_>,
    name: &str,
    described: &str,
) -> Option<&'static str> {
    let ctx = out.ctx;
    let settings = &ctx.rt.settings;
    // The run's table holds only what it offers: for a subagent, its own tool list (never
    // `task`); for a turn, what the primary profile allows.
    let policy = out.tools.class(name).map(|c| match c {
        ToolClass::Read => settings.tool_read,
        ToolClass::Write => settings.tool_write,
        ToolClass::Shell => settings.tool_shell,
        ToolClass::Client => settings.tool_client,
        ToolClass::Mcp => settings.tool_mcp,
        ToolClass::Task => settings.tool_task,
    });
    match policy {
        None => Some("unknown tool"),
        Some(Policy::Deny) => Some("denied by policy"),
        Some(Policy::Allow) => None,
        Some(Policy::Ask) => {
            let approval_id = uuid::Uuid::new_v4().hyphenated().to_string();
            ctx.approvals.open(&out.run_id, &approval_id);
            let (session_id, run_id) = out.ids();
            out.critical(Event::ApprovalRequested(ApprovalRequestedData {
                session_id,
                run_id,
                approval_id: approval_id.clone(),
                summary: described.to_owned(),
                expires_in_ms: protocol_core::limits::APPROVAL_EXPIRY_MS,
            }));
            let cancel = ctx.cancel;
            match ctx
                .approvals
                .wait(&approval_id, APPROVAL_EXPIRY, &|| cancel.is_cancelled())
            {
                Decision::Allowed => None,
                Decision::Denied => Some("denied by the user"),
                Decision::Expired => Some("denied by the user (the approval expired)"),
                Decision::Cancelled => Some("cancelled"),
            }
        }
    }
}

/// Emits the call's final activity for what the tool produced (`None` when it did not run)
/// and returns what the model gets back.
pub fn complete(
    out: &mut RunOutput<'_>,
    mut p: Prepared,
    outcome: Option<ToolOutcome>,
    records: &mut Vec<Record>,
) -> ToolRun {
    let post = p.post.take();
    let described = &p.described;
    let ran = outcome.as_ref().filter(|_| p.refused.is_none());
    let post = post.zip(ran.map(|o| o.ok));
    let status = match ran {
        Some(o) if o.ok => CardStatus::Completed,
        _ => CardStatus::Failed,
    };
    let shown_card = p.card.render(status, ran);
    let (state, summary, run) = match (p.refused.take(), outcome) {
        (None, Some(o)) => {
            let state = if o.ok {
                ActivityState::Completed
            } else {
                ActivityState::Failed
            };
            // A failure's summary (`exit 3`, `not found`) heads the output unless it already
            // does: Chat and Responses results carry no error flag, so the text must say it.
            let output = if o.ok || o.output.starts_with(&o.summary) {
                o.output
            } else {
                bound_output(format!("{}\n{}", o.summary, o.output), false)
            };
            let run = ToolRun {
                output,
                is_error: !o.ok,
            };
            (state, format!("{described}: {}", o.summary), run)
        }
        (why, _) => {
            let why = why.unwrap_or_else(|| "cancelled".to_owned());
            (
                ActivityState::Failed,
                format!("{described}: {why}"),
                ToolRun {
                    output: why,
                    is_error: true,
                },
            )
        }
    };
    let summary = bounded(&sanitize_text(&summary), SUMMARY_BYTES);
    let (event, record) = activity(out, &p.activity_id, state, &p.shown, &summary);
    out.critical(event);
    records.push(record);
    card(out, &p.activity_id, shown_card, records);
    if let Some(((name, input), ok)) = post {
        super::hooks::post_tool(out, &name, &input, ok);
    }
    run
}

/// Runs one tool call through [`prepare`], the tool, and [`complete`].
pub fn call(
    out: &mut RunOutput<'_>,
    name: &str,
    input: &Value,
    records: &mut Vec<Record>,
) -> ToolRun {
    let p = prepare(out, name, input, records);
    let kind = out.tools.lookup(name).filter(|_| p.may_run());
    let outcome = match kind {
        None => None,
        // Dispatch point for `client.tools`: the client runs it, never the backend.
        Some(ToolKind::Client) => Some(client_tool::run(out, name, input)),
        Some(ToolKind::Task) => Some(subagent::run(out, input)),
        Some(ToolKind::Mcp) => Some(match out.ctx.mcp.as_deref() {
            Some(hub) => call_mcp(out, hub, name, input),
            None => ToolOutcome::fail("unknown tool"),
        }),
        Some(ToolKind::Builtin(tool)) => {
            Some(tools::run(tool, input, &out.ctx.rt.cwd, out.ctx.cancel))
        }
    };
    complete(out, p, outcome, records)
}

// ---- MCP tools (issue 8): `tools/call` through the hub.

/// Calls an MCP tool; a server found gone also gets a diagnostic: `mcp_server_exited` when it
/// exited, `mcp_server_failed` when it broke the protocol and was killed.
fn call_mcp(out: &mut RunOutput<'_>, hub: &McpHub, name: &str, input: &Value) -> ToolOutcome {
    let done = hub.call(name, input, out.ctx.cancel);
    match done.lost {
        Some(Lost::Exited) => out.diagnostic(
            DiagnosticCode::McpServerExited,
            "an MCP server has exited; its tools fail",
        ),
        Some(Lost::Failed) => out.diagnostic(
            DiagnosticCode::McpServerFailed,
            "an MCP server broke the protocol and was stopped; its tools fail",
        ),
        None => {}
    }
    let summary = match (done.result.ok, done.lost) {
        (true, _) => "ok",
        (false, Some(Lost::Exited)) => "server exited",
        (false, Some(Lost::Failed)) => "server failed",
        (false, None) => "error",
    };
    ToolOutcome {
        ok: done.result.ok,
        summary: summary.to_owned(),
        output: bound_output(done.result.text, false),
        details: tools::ToolDetails::None,
    }
}
