//! One tool call's activities and cards (`started` and final), the policy that applies to it
//! and what the model gets back: the frames of a call, built from the wire types.

use crate::config::Policy;
use crate::history::{ActivityKind, ActivityState, Body};
use crate::tools::outcome::bound_output;
use crate::tools::{Card, CardStatus, ToolClass, ToolKind, ToolOutcome};
use crate::util::redact::{safe_name, sanitize_text};
use crate::util::text::bounded;
use crate::wire::events::ToolCardData;
use crate::wire::{self, Event};
use protocol_core::limits::SUMMARY_BYTES;
use serde_json::Value;

use super::Run;

/// What the model gets back for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRun {
    /// The bounded output, or a fixed short text saying why the call did not run.
    pub output: String,
    /// Whether the call failed, was refused or was cut short.
    pub is_error: bool,
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
    /// A `post_tool` hook applies to it.
    pub post: bool,
}

/// What a call gets when the run was cancelled before it started.
pub fn cancelled_run() -> ToolRun {
    ToolRun {
        output: "cancelled: the call did not run".to_owned(),
        is_error: true,
    }
}

/// What a call gets when the run's activity bound leaves it no room: it does not run.
pub fn over_activities() -> ToolRun {
    ToolRun {
        output: "refused: the turn reached its bound of tool activities".to_owned(),
        is_error: true,
    }
}

impl Run {
    /// The policy of the tool's class; the run's table holds only what it offers (for a
    /// subagent, its own tool list, never `task`).
    pub(super) fn policy(&self, name: &str) -> Option<Policy> {
        let p = self.cfg.policies;
        self.cfg.tools.class(name).map(|c| match c {
            ToolClass::Read => p.read,
            ToolClass::Write => p.write,
            ToolClass::Shell => p.shell,
            ToolClass::Client => p.client,
            ToolClass::Mcp => p.mcp,
            ToolClass::Task => p.task,
        })
    }

    /// The `started` activity and card of a call, not yet refused.
    pub(super) fn start_call(&mut self, name: String, input: Value) -> Prepared {
        let activity_id = self.voice.fresh_id("t-");
        let shown = safe_name(&name).unwrap_or_else(|| "tool".into());
        let kind = self.cfg.tools.lookup(&name);
        let client = kind == Some(ToolKind::Client);
        let described = if client {
            // The client's tool: its name is the description (the input is the client's).
            shown.clone()
        } else {
            bounded(&self.cfg.tools.summary(&name, &input), SUMMARY_BYTES)
        };
        let started = if kind == Some(ToolKind::Task) {
            format!("{described}: running")
        } else {
            described.clone()
        };
        self.call_activity(&activity_id, kind, ActivityState::Started, &shown, &started);
        // Client tools (`client.tools`) get `Card::client`; every other name is classified.
        let card = if client {
            Card::client(&name)
        } else {
            Card::new(&name, &input, &self.cfg.cwd)
        };
        self.card(&activity_id, card.render(CardStatus::Running, None));
        Prepared {
            name,
            input,
            kind,
            activity_id,
            shown,
            described,
            card,
            refused: None,
            post: false,
        }
    }

    pub(super) fn call_activity(
        &mut self,
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
        let (event, record) = self.voice.activity(id, kind, state, shown, summary);
        self.voice.critical(event);
        self.records.push(record);
    }

    /// Stores the activity's card after its record and, when the client negotiated
    /// `tool.cards`, sends it as a `tool.card` event right after the `activity` event.
    pub(super) fn card(&mut self, id: &str, card: wire::tool_cards::Card) {
        // The record stores the card as the event sends it: serialized through `Value`.
        let stored = wire::body(&card);
        if self.cfg.tool_cards {
            let (session_id, run_id) = self.voice.ids();
            self.voice.critical(Event::ToolCard(ToolCardData {
                session_id,
                run_id,
                activity_id: id.to_owned(),
                card,
            }));
        }
        let record = self.voice.record(Body::ToolCard {
            run_id: self.cfg.run_id.clone(),
            activity_id: id.to_owned(),
            card: stored,
        });
        self.records.push(record);
    }

    /// Emits the call's final activity and card for what the tool produced (`None` when it
    /// did not run) and returns what the model gets back.
    pub(super) fn complete(&mut self, mut p: Prepared, outcome: Option<ToolOutcome>) -> ToolRun {
        let described = p.described.clone();
        let ran = outcome.as_ref().filter(|_| p.refused.is_none());
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
                // A failure's summary (`exit 3`, `not found`) heads the output unless it
                // already does: Chat and Responses results carry no error flag.
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
                let summary = format!("{described}: {why}");
                let run = ToolRun {
                    output: why,
                    is_error: true,
                };
                (ActivityState::Failed, summary, run)
            }
        };
        let summary = bounded(&sanitize_text(&summary), SUMMARY_BYTES);
        self.call_activity(&p.activity_id, p.kind, state, &p.shown, &summary);
        self.card(&p.activity_id, shown_card);
        run
    }
}
