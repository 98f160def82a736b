//! Compaction as states of the run (`runner.md` 7): the `compaction` activity stored, the
//! summary request (an overflow retries once with half the input), the `compaction` record
//! stored, and the run resumed where it compacted. Every append outcome is handled: a lost
//! one ends the run `persistence_failed` with persistence `degraded`.

use super::compaction::{
    summary_budget, summary_output_bound, transcript, Compacted, SUMMARY_BYTES, SUMMARY_INSTRUCTION,
};
use super::{After, AppendKind, End, Output, Phase, Run, StepRequest, Stored};
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

impl Run {
    /// Compacts the conversation now, for the check at `at`.
    pub(super) fn compact(&mut self, at: After) {
        if !self.take_activity() {
            return self.resume(at, Compacted::Skipped);
        }
        let id = self.voice.fresh_id("c-");
        let started =
            self.compaction_activity(&id, ActivityState::Started, "summarizing the conversation");
        let budget = summary_budget(self.cfg.context_window, self.cfg.max_output_tokens);
        self.store_compaction(
            Compaction {
                id,
                at,
                stage: Stage::Opening,
                budget,
                overflowed: false,
                pending: Vec::new(),
            },
            vec![started],
        );
    }

    fn compaction_activity(&mut self, id: &str, state: ActivityState, summary: &str) -> Record {
        let (event, record) =
            self.voice
                .activity(id, ActivityKind::Compaction, state, "compaction", summary);
        self.voice.critical(event);
        record
    }

    fn store_compaction(&mut self, mut c: Compaction, records: Vec<Record>) {
        c.pending.clone_from(&records);
        self.voice.queue.push_back(Output::Append {
            records,
            kind: AppendKind::Compaction,
        });
        self.phase = Phase::Compacting(c);
    }

    fn summarize(&mut self, mut c: Compaction) {
        let text = format!(
            "{}\n\n---\n{SUMMARY_INSTRUCTION}",
            transcript(&self.items, c.budget)
        );
        self.voice.queue.push_back(Output::Summarize(StepRequest {
            items: vec![Item::User { text }],
            max_output_tokens: summary_output_bound(
                self.cfg.context_window,
                self.cfg.max_output_tokens,
            ),
        }));
        c.stage = Stage::Summarizing;
        self.phase = Phase::Compacting(c);
    }

    /// An append of the compaction's records ended.
    pub(super) fn compaction_stored(&mut self, mut c: Compaction, r: Result<Stored, ErrorCode>) {
        if r.is_err() {
            if c.stage == Stage::Opening {
                // Closed for the client; its record could not be stored either.
                let failed = "the compaction could not be stored";
                drop(self.compaction_activity(&c.id, ActivityState::Failed, failed));
            }
            return self.resume(c.at, Compacted::Unstored);
        }
        self.comp.note(&std::mem::take(&mut c.pending));
        match std::mem::replace(&mut c.stage, Stage::Summarizing) {
            // Cancelled meanwhile: closed as the summary's cancellation is, with no request.
            Stage::Opening if self.cancelled => {
                let what = "the summary request failed (cancelled)";
                let done = self.compaction_activity(&c.id, ActivityState::Failed, what);
                let why = "cancelled".to_owned();
                c.stage = Stage::Closing {
                    cancelled: true,
                    why,
                };
                self.store_compaction(c, vec![done]);
            }
            Stage::Opening => self.summarize(c),
            Stage::Closing {
                cancelled: true, ..
            } => self.resume(c.at, Compacted::Cancelled),
            Stage::Closing { why, .. } => {
                let summary = format!("the conversation could not be compacted ({why})");
                self.voice
                    .diagnostic(DiagnosticCode::CompactionFailed, &summary);
                self.resume(c.at, Compacted::Failed);
            }
            Stage::Storing => {
                self.comp.restart();
                self.resume(c.at, Compacted::Done);
            }
            Stage::Summarizing => self.phase = Phase::Compacting(c),
        }
    }

    /// The summary request ended with its raw text.
    pub(super) fn on_summary(&mut self, r: Result<String, StepFailure>) {
        if !matches!(self.phase, Phase::Compacting(_)) {
            return;
        }
        let Phase::Compacting(mut c) = std::mem::replace(&mut self.phase, Phase::Finished) else {
            return;
        };
        if c.stage != Stage::Summarizing {
            self.phase = Phase::Compacting(c);
            return;
        }
        if matches!(r, Err(StepFailure::ContextOverflow)) && !c.overflowed {
            c.overflowed = true;
            c.budget /= 2;
            return self.summarize(c);
        }
        let cancelled = self.cancelled || self.voice.output_lost;
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
                let done = self.compaction_activity(&c.id, ActivityState::Failed, &what);
                c.stage = Stage::Closing { cancelled, why };
                return self.store_compaction(c, vec![done]);
            }
        };
        let through = self.comp.replace(&mut self.items, &summary);
        let record = self.voice.record(Body::Compaction {
            summary: Some(summary),
            through: Some(through),
            title: None,
        });
        let what = format!("summarized {through} records");
        let done = self.compaction_activity(&c.id, ActivityState::Completed, &what);
        c.stage = Stage::Storing;
        self.store_compaction(c, vec![record, done]);
    }

    /// Goes on where the compaction started.
    fn resume(&mut self, at: After, compacted: Compacted) {
        match at {
            After::Due | After::NoRoom => self.before_request(at, compacted),
            After::Overflow => match compacted {
                Compacted::Done => {
                    self.steps -= 1;
                    self.begin_step();
                }
                Compacted::Unstored => {
                    self.degraded = true;
                    self.finish(End::Failed(ErrorCode::PersistenceFailed));
                }
                Compacted::Skipped | Compacted::Failed | Compacted::Cancelled => {
                    self.overflow_stays();
                }
            },
        }
    }
}
