//! Compaction as states of the run (`runner.md` 7): the `compaction` activity stored, the
//! summary request (an overflow retries once with half the input), the `compaction` record
//! stored; then the run resumes where it compacted (`machine`). Every append outcome is handled: a lost
//! one ends the run `persistence_failed` with persistence `degraded`.

use super::compaction::{
    summary_budget, summary_output_bound, transcript, Compacted, SUMMARY_BYTES, SUMMARY_INSTRUCTION,
};
use super::io::{After, AppendKind, Output, StepRequest, Stored};
use super::shared::Shared;
use crate::history::{ActivityKind, ActivityState, Body, Item, Record};
use crate::providers::StepFailure;
use crate::util::redact::sanitize_text;
use crate::wire::DiagnosticCode;
use protocol_core::ErrorCode;

/// A compaction in progress.
#[derive(Debug)]
pub struct Compaction {
    id: String,
    at: After,
    stage: Stage,
    budget: usize,
    overflowed: bool,
    /// The records of the append that is out, noted by the compactor once stored.
    pending: Vec<Record>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    /// The `started` activity's append is out.
    Opening,
    /// The summary request is out.
    Summarizing,
    /// The `failed` activity's append is out; then the run resumes (`cancelled`) or goes on
    /// without it (`compaction_failed`, with why).
    Closing { cancelled: bool, why: String },
    /// The `compaction` record's append is out.
    Storing,
}

/// What comes after a compaction's state changed.
#[derive(Debug)]
pub enum CompactNext {
    /// It waits for its append or its summary.
    Wait(Compaction),
    /// It is over: the run resumes at the check it started from.
    Resume(After, Compacted),
}

/// Compacts the conversation now, for the check at `at`.
pub fn start(sh: &mut Shared, at: After) -> CompactNext {
    if !sh.take_activity() {
        return CompactNext::Resume(at, Compacted::Skipped);
    }
    let id = sh.voice.fresh_id("c-");
    let started = activity(
        sh,
        &id,
        ActivityState::Started,
        "summarizing the conversation",
    );
    let budget = summary_budget(sh.cfg.context_window, sh.cfg.max_output_tokens);
    let c = Compaction {
        id,
        at,
        stage: Stage::Opening,
        budget,
        overflowed: false,
        pending: Vec::new(),
    };
    store(sh, c, vec![started])
}

fn activity(sh: &mut Shared, id: &str, state: ActivityState, summary: &str) -> Record {
    let (event, record) =
        sh.voice
            .activity(id, ActivityKind::Compaction, state, "compaction", summary);
    sh.voice.critical(event);
    record
}

fn store(sh: &mut Shared, mut c: Compaction, records: Vec<Record>) -> CompactNext {
    c.pending.clone_from(&records);
    sh.push(Output::Append {
        records,
        kind: AppendKind::Compaction,
    });
    CompactNext::Wait(c)
}

fn summarize(sh: &mut Shared, mut c: Compaction) -> CompactNext {
    let text = format!(
        "{}\n\n---\n{SUMMARY_INSTRUCTION}",
        transcript(&sh.items, c.budget)
    );
    let max_output_tokens = summary_output_bound(sh.cfg.context_window, sh.cfg.max_output_tokens);
    sh.push(Output::Summarize(StepRequest {
        items: vec![Item::User { text }],
        max_output_tokens,
    }));
    c.stage = Stage::Summarizing;
    CompactNext::Wait(c)
}

/// An append of the compaction's records ended.
pub fn stored(sh: &mut Shared, mut c: Compaction, r: Result<Stored, ErrorCode>) -> CompactNext {
    if r.is_err() {
        if c.stage == Stage::Opening {
            // Closed for the client; its record could not be stored either.
            let failed = "the compaction could not be stored";
            drop(activity(sh, &c.id, ActivityState::Failed, failed));
        }
        return CompactNext::Resume(c.at, Compacted::Unstored);
    }
    sh.comp.note(&std::mem::take(&mut c.pending));
    match std::mem::replace(&mut c.stage, Stage::Summarizing) {
        // Cancelled meanwhile: closed as the summary's cancellation is, with no request.
        Stage::Opening if sh.cancelled => {
            let what = "the summary request failed (cancelled)";
            let done = activity(sh, &c.id, ActivityState::Failed, what);
            c.stage = Stage::Closing {
                cancelled: true,
                why: "cancelled".to_owned(),
            };
            store(sh, c, vec![done])
        }
        Stage::Opening => summarize(sh, c),
        Stage::Closing {
            cancelled: true, ..
        } => CompactNext::Resume(c.at, Compacted::Cancelled),
        Stage::Closing { why, .. } => {
            let summary = format!("the conversation could not be compacted ({why})");
            sh.voice
                .diagnostic(DiagnosticCode::CompactionFailed, &summary);
            CompactNext::Resume(c.at, Compacted::Failed)
        }
        Stage::Storing => {
            sh.comp.restart();
            CompactNext::Resume(c.at, Compacted::Done)
        }
        // No append is out while the summary is: an outcome now changes nothing.
        Stage::Summarizing => CompactNext::Wait(c),
    }
}

/// Whether the compaction waits for its summary (a retry's diagnostic names it).
#[must_use]
pub fn summarizing(c: &Compaction) -> bool {
    c.stage == Stage::Summarizing
}

/// The summary request ended with its raw text.
pub fn summary(sh: &mut Shared, mut c: Compaction, r: Result<String, StepFailure>) -> CompactNext {
    if c.stage != Stage::Summarizing {
        return CompactNext::Wait(c);
    }
    if matches!(r, Err(StepFailure::ContextOverflow)) && !c.overflowed {
        c.overflowed = true;
        c.budget /= 2;
        return summarize(sh, c);
    }
    let cancelled = sh.cancelled || sh.voice.output_lost;
    // An empty summary would replace the conversation with nothing.
    let r = r.and_then(|t| {
        let summary = crate::util::text::bounded(sanitize_text(&t).trim(), SUMMARY_BYTES);
        if summary.is_empty() {
            Err(StepFailure::Remote)
        } else {
            Ok(summary)
        }
    });
    let summary = match r {
        Ok(s) if !cancelled => s,
        failed => {
            let why = match failed {
                Err(f) if !cancelled => f
                    .code()
                    .map_or("cancelled", DiagnosticCode::as_str)
                    .to_owned(),
                _ => "cancelled".to_owned(),
            };
            let what = format!("the summary request failed ({why})");
            let done = activity(sh, &c.id, ActivityState::Failed, &what);
            c.stage = Stage::Closing { cancelled, why };
            return store(sh, c, vec![done]);
        }
    };
    let through = sh.comp.replace(&mut sh.items, &summary);
    let record = sh.voice.record(Body::Compaction {
        summary: Some(summary),
        through: Some(through),
        title: None,
    });
    let what = format!("summarized {through} records");
    let done = activity(sh, &c.id, ActivityState::Completed, &what);
    c.stage = Stage::Storing;
    store(sh, c, vec![record, done])
}
