//! Session titles (`runner.md` 7 "Titles"). After each turn of an attachment that completes
//! durably while its session has no stored title, the worker sends one request without tools
//! to the same model, beside the session's worker (`worker::titles` allows three per session
//! per child, one at a time); its answer, sanitized, one line and cut to 50 characters, is
//! appended as a `title` record. Every failure is silent: no diagnostic, no event, no record.

use super::emit::TurnCtx;
use crate::config::providers;
use crate::history::{display_title, Body, Item, Record};
use crate::providers::model::{StopReason, Thinking};
use crate::providers::{HttpModel, ModelClient, ModelEvent, ModelRequest, ScriptedModel};
use crate::providers::{StepFailure, StepSink};
use crate::run::{Finished, Persistence, RunOutcome};
use crate::runtime::Runtime;
use crate::session::{self, Selection, SessionState};
use crate::util::cancel::Cancel;
use crate::util::redact::sanitize_text;
use crate::util::text::cut;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Longest stored title, in characters (`runner.md` 7).
pub const TITLE_CHARS: usize = 50;
/// The title request's output bound.
pub const TITLE_OUTPUT_TOKENS: u64 = 64;
/// Most bytes of the first input, and of its reply, sent in the title request.
pub const TITLE_CONTEXT_BYTES: usize = 4096;
/// Most bytes of answer text collected; the rest of a long answer is not read.
const TITLE_ANSWER_BYTES: usize = 1024;
/// The fixed instruction of every title request (also how a test server recognizes one).
pub const TITLE_INSTRUCTION: &str = "Reply with a short title for the conversation below: at \
most six words on one line, no quotes, no punctuation at the end, nothing else.";

/// One title request to make: the session, the model of the turn, and what it is about.
#[derive(Debug, Clone)]
pub struct TitleJob {
    /// The session to title.
    pub session_id: String,
    provider: String,
    model: String,
    /// The session's first user input (cut).
    input: String,
    /// The first reply to it (cut; empty if there was none).
    reply: String,
}

/// The title job due after a turn that finished as `finished`, if any: the turn completed
/// durably, the session is still attached with no stored title, and the model can title
/// (`scripted/script` plays turns only and never titles).
#[must_use]
pub fn due(
    ctx: &TurnCtx<'_>,
    session_id: &str,
    selection: &Selection,
    finished: &Finished,
) -> Option<TitleJob> {
    if finished.outcome != RunOutcome::Completed || finished.persistence != Persistence::Durable {
        return None;
    }
    if providers::is_offline(&selection.provider) && selection.model != providers::ECHO {
        return None;
    }
    let st = ctx.state();
    let a = st
        .attachment
        .as_ref()
        .filter(|a| a.id.as_str() == session_id)?;
    if a.history.as_ref()?.summary().title.is_some() {
        return None;
    }
    let items = a.first_turn().ok()?;
    let first = items.iter().position(|i| matches!(i, Item::User { .. }))?;
    let Item::User { text: input } = &items[first] else {
        return None;
    };
    let reply = items[first + 1..]
        .iter()
        .take_while(|i| !matches!(i, Item::User { .. }))
        .find_map(|i| match i {
            Item::Assistant { text } => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    Some(TitleJob {
        session_id: session_id.to_owned(),
        provider: selection.provider.clone(),
        model: selection.model.clone(),
        input: cut(input, TITLE_CONTEXT_BYTES).to_owned(),
        reply: cut(reply, TITLE_CONTEXT_BYTES).to_owned(),
    })
}

/// The stored form of a model's answer: sanitized, its first non-blank line, one pair of
/// surrounding quotes dropped, cut to [`TITLE_CHARS`] characters; `None` when nothing is
/// left or discovery would not show it.
#[must_use]
pub fn clean(answer: &str) -> Option<String> {
    let clean = sanitize_text(answer);
    let line = clean.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.replace('\t', " ");
    let mut t = line.trim();
    for q in ['"', '\'', '`'] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            t = t[1..t.len() - 1].trim();
        }
    }
    let title: String = t.chars().take(TITLE_CHARS).collect();
    let title = title.trim_end();
    display_title(title)
        .filter(|shown| shown == title)
        .map(|_| title.to_owned())
}

/// Collects a title answer's text; a retry ends the request (a title is not worth waiting
/// for), as does enough text.
struct Collect<'c> {
    text: String,
    cancel: &'c Cancel,
}

impl StepSink for Collect<'_> {
    fn event(&mut self, ev: ModelEvent) -> bool {
        match ev {
            ModelEvent::TextDelta(t) => {
                self.text.push_str(&t);
                self.text.len() < TITLE_ANSWER_BYTES
            }
            ModelEvent::Stop(StopReason::Other) => {
                // A refusal or filter: whatever text came is not a title.
                self.text.clear();
                false
            }
            _ => true,
        }
    }

    fn retry(&mut self, _attempt: u32, _of: u32, _wait: Duration) {
        self.cancel.cancel();
    }
}

/// Makes the title request of `job` and appends its `title` record, unless `cancel` is set,
/// the request fails, the session is no longer the attachment or it got a title meanwhile.
/// The session lock is taken only to append, never while the request is out.
pub fn run(job: &TitleJob, rt: &Runtime, session: &Mutex<SessionState>, cancel: &Cancel) {
    let mut client: Box<dyn ModelClient> = if providers::is_offline(&job.provider) {
        // The offline echo model titles a session with its first input's words.
        if job.model != providers::ECHO {
            return;
        }
        Box::new(ScriptedModel::echo(&job.input))
    } else if providers::is_agent_cli(&job.provider) {
        // An agent CLI titles with a one-shot process of its own.
        match crate::providers::target::cli_launch(&rt.settings, &job.provider, &rt.cwd, 0) {
            Some(l) => Box::new(crate::providers::claude_title::ClaudeTitle::new(l)),
            None => return,
        }
    } else {
        match crate::providers::target(rt, &job.provider, &job.model) {
            Some(t) => Box::new(HttpModel::new(t).in_session(&job.session_id)),
            None => return,
        }
    };
    let items = [Item::User {
        text: format!(
            "User: {}\n\nAssistant: {}",
            job.input,
            if job.reply.is_empty() {
                "(no reply)"
            } else {
                &job.reply
            }
        ),
    }];
    let req = ModelRequest {
        model: &job.model,
        provider: &job.provider,
        instructions: TITLE_INSTRUCTION,
        items: &items,
        tools: &[],
        effort: None,
        thinking: Thinking::Adaptive,
        max_output_tokens: TITLE_OUTPUT_TOKENS,
    };
    let mut sink = Collect {
        text: String::new(),
        cancel,
    };
    let stepped: Result<(), StepFailure> = client.step(&req, cancel, &mut sink);
    if stepped.is_err() || cancel.is_cancelled() {
        return;
    }
    let Some(title) = clean(&sink.text) else {
        return;
    };
    let mut st = session.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(a) = st
        .attachment
        .as_mut()
        .filter(|a| a.id.as_str() == job.session_id)
    else {
        return;
    };
    if a.history
        .as_ref()
        .is_none_or(|h| h.summary().title.is_some())
    {
        return;
    }
    let record = Record::now(&job.session_id, Body::Title { title });
    // Handled by being silent (`runner.md` 7): a failed append leaves no title, the turn
    // records are untouched, and the run that asked has already ended.
    if session::append_unseen(rt, a, &[record]).is_err() {
        drop(st);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_one_clean_line_cut_to_fifty_characters() {
        let fifty = "é".repeat(TITLE_CHARS);
        assert_eq!(clean(&fifty).as_deref(), Some(fifty.as_str()), "50 kept");
        let fifty_one = format!("{fifty}x");
        assert_eq!(clean(&fifty_one).as_deref(), Some(fifty.as_str()), "51 cut");
        assert_eq!(
            clean("\n  \"Fix the parser\"  \nsecond line").as_deref(),
            Some("Fix the parser")
        );
        assert_eq!(clean("a\tb\u{7}c").as_deref(), Some("a bc"));
        assert_eq!(clean("  \n \n"), None);
        assert_eq!(clean("\"\""), None);
        let secret = clean("Token sk-ant-abcdefghijklmnopqrstuvwxyz0123456789 leak").unwrap();
        assert!(!secret.contains("sk-ant"), "{secret}");
    }
}
