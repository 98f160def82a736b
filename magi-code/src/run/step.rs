//! A step of the run (`runner.md` 2): the checks before its request (the step bound,
//! compaction, the room for a reply), its streamed events into the segment, the records and
//! the step's output, and how it ended.

use super::compaction::{output_bound, overflowed, Compacted};
use super::content::{CALLS_STOPPED, REPLY_STOPPED};
use super::segment::{close_segment, Segment};
use super::{After, End, Output, Phase, Run, StepRequest};
use crate::history::{Body, Item};
use crate::providers::model::Usage;
use crate::providers::{ModelEvent, StepFailure};
use crate::util::redact::sanitize_text;
use crate::wire::DiagnosticCode;
use protocol_core::ErrorCode;
use serde_json::Value;

/// A streaming step's output so far.
#[derive(Debug)]
pub struct Streaming {
    /// The assistant text segment.
    pub seg: Segment,
    /// Assistant-side items in the model's order; the text segment's place is `text_at`.
    pub items: Vec<Item>,
    text_at: Option<usize>,
    /// The tool calls: ID, name, input.
    pub calls: Vec<(String, String, Value)>,
    usage: Option<Usage>,
    /// The run's content bound was reached (`content_limit`): the step stops.
    pub over: bool,
    estimate: u64,
}

impl Run {
    /// The next step, if the run may take one: compaction first when due, then its request.
    pub(super) fn begin_step(&mut self) {
        // A cancelled run asks the provider for nothing more (no step, no compaction).
        if self.cancelled {
            return self.finish(End::Cancelled);
        }
        if self.steps >= self.cfg.max_steps {
            let summary = format!("the turn reached its bound of {} steps", self.cfg.max_steps);
            self.voice.diagnostic(DiagnosticCode::StepLimit, &summary);
            return self.finish(End::Failed(ErrorCode::ExecutionFailed));
        }
        self.steps += 1;
        // A conversation that is only this turn's input has nothing to summarize.
        if self.comp.due(&self.items) && self.items.len() > 1 {
            return self.compact(After::Due);
        }
        self.before_request(After::Due, Compacted::Skipped);
    }

    /// Goes on after the checks before a step, at `at`, with what a compaction there did.
    pub(super) fn before_request(&mut self, at: After, compacted: Compacted) {
        let estimate = self.comp.estimate(&self.items);
        let bound = output_bound(
            self.cfg.context_window,
            estimate,
            self.cfg.max_output_tokens,
        );
        // No room for a reply: compact first if this step has not, then give up.
        if at == After::Due
            && bound.is_none()
            && compacted == Compacted::Skipped
            && self.items.len() > 1
        {
            return self.compact(After::NoRoom);
        }
        match compacted {
            Compacted::Cancelled => return self.finish(End::Cancelled),
            Compacted::Unstored => {
                self.degraded = true;
                return self.finish(End::Failed(ErrorCode::PersistenceFailed));
            }
            Compacted::Done | Compacted::Skipped | Compacted::Failed => {}
        }
        if self.cancelled {
            return self.finish(End::Cancelled);
        }
        let Some(max_output_tokens) = bound else {
            let summary = self.too_small(estimate);
            self.voice
                .diagnostic(DiagnosticCode::ContextWindowTooSmall, &summary);
            return self.finish(End::Failed(ErrorCode::ExecutionFailed));
        };
        let seg = Segment::new(self.voice.fresh_id("a-"));
        self.voice.queue.push_back(Output::Step(StepRequest {
            items: self.items.clone(),
            max_output_tokens,
        }));
        self.phase = Phase::Streaming(Streaming {
            seg,
            items: Vec::new(),
            text_at: None,
            calls: Vec::new(),
            usage: None,
            over: false,
            estimate,
        });
    }

    /// The `context_window_too_small` summary: the window, the estimate, and the settings
    /// that set the window.
    fn too_small(&self, estimate: u64) -> String {
        format!(
            "the context window of {} tokens leaves no room for a reply to this request (about {estimate} tokens); raise providers.{}.context_window (or runner.context_window)",
            self.cfg.context_window, self.cfg.provider
        )
    }

    /// One event of the streaming step: the run keeps what fits its bounds; past them the
    /// step stops (`content_limit`).
    pub(super) fn on_model(&mut self, ev: ModelEvent) {
        let Self {
            phase: Phase::Streaming(s),
            content,
            voice,
            records,
            cfg,
            ..
        } = self
        else {
            return;
        };
        if s.over {
            return;
        }
        let run_id = cfg.run_id.clone();
        match ev {
            ModelEvent::TextDelta(t) => {
                // Control characters alone show nothing (redaction drops them).
                if t.chars().all(|c| c.is_control() && c != '\n' && c != '\t') {
                    return;
                }
                let n = content.take_text(&mut s.seg, &t);
                if n > 0 {
                    if s.seg.is_empty() {
                        s.text_at = Some(s.items.len());
                        s.items.push(Item::Assistant {
                            text: String::new(),
                        });
                    }
                    s.seg.push(voice, &t[..n]);
                }
                s.over = n < t.len();
            }
            ModelEvent::ToolCall {
                call_id,
                name,
                input,
            } => {
                s.items.push(Item::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                s.calls.push((call_id, name, input));
            }
            ModelEvent::ReasoningSummary { id, text } => {
                let text = sanitize_text(&text);
                if !content.take_summary(&text) {
                    s.over = true;
                    return;
                }
                records.push(voice.record(Body::ReasoningSummary {
                    run_id,
                    text,
                    item_id: Some(id),
                    provider_summary: Some(true),
                }));
            }
            ModelEvent::ProviderItem(item) => {
                let provider = cfg.provider.clone();
                records.push(voice.record(Body::ProviderItem {
                    run_id,
                    provider: provider.clone(),
                    item: item.clone(),
                }));
                s.items.push(Item::ProviderItem { provider, item });
            }
            ModelEvent::Usage(u) => s.usage = Some(u),
            // How the step stopped shows in its calls: none ends the turn.
            ModelEvent::Stop(_) => {}
        }
    }

    /// The events of one network read are in: held-back text goes out.
    pub(super) fn on_flush(&mut self) {
        if let Phase::Streaming(s) = &mut self.phase {
            s.seg.flush(&mut self.voice);
        }
    }

    /// A retry of the step's or the summary's request is about to wait.
    pub(super) fn on_retry(&mut self, attempt: u32, wait_ms: u64) {
        let what = match self.phase {
            Phase::Streaming(_) => "provider",
            Phase::Compacting(_) => "summary",
            _ => return,
        };
        let summary = format!(
            "retrying the {what} request in {wait_ms} ms (retry {attempt} of {})",
            crate::providers::http::MAX_RETRIES
        );
        self.voice
            .diagnostic(DiagnosticCode::ProviderRetry, &summary);
    }

    /// The streaming step ended: its usage is recorded; a step the provider refused as too
    /// long compacts and is sent once more.
    pub(super) fn on_step_ended(&mut self, result: Result<(), StepFailure>) {
        if !matches!(self.phase, Phase::Streaming(_)) {
            return;
        }
        let Phase::Streaming(s) = std::mem::replace(&mut self.phase, Phase::Finished) else {
            return;
        };
        let window = self.cfg.context_window;
        let result = result.map_err(|f| overflowed(f, s.estimate, window));
        if let Some(u) = s.usage {
            let usage = self.voice.record(Body::Usage {
                run_id: self.cfg.run_id.clone(),
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cached_input_tokens: u.cached_input_tokens,
            });
            self.records.push(usage);
        }
        if matches!(result, Err(StepFailure::ContextOverflow))
            && !self.retried
            && self.records.is_empty()
            && s.items.is_empty()
            && s.seg.is_empty()
            && !self.cancelled
        {
            self.retried = true;
            return self.compact(After::Overflow);
        }
        self.step_result(s, result);
    }

    /// After a compaction for an overflow that did not help: the step ends as it did.
    pub(super) fn overflow_stays(&mut self) {
        let s = Streaming {
            seg: Segment::new(self.voice.fresh_id("a-")),
            items: Vec::new(),
            text_at: None,
            calls: Vec::new(),
            usage: None,
            over: false,
            estimate: 0,
        };
        self.step_result(s, Err(StepFailure::ContextOverflow));
    }

    /// How a step ended: the run stops, or its calls run.
    fn step_result(&mut self, mut s: Streaming, result: Result<(), StepFailure>) {
        let stopped = match result {
            _ if self.voice.output_lost => Some(End::Failed(ErrorCode::OutputUnavailable)),
            _ if s.over => {
                self.voice
                    .diagnostic(DiagnosticCode::ContentLimit, REPLY_STOPPED);
                Some(End::Failed(ErrorCode::ContentLimit))
            }
            Err(StepFailure::Cancelled) => Some(End::Cancelled),
            _ if self.cancelled => Some(End::Cancelled),
            Err(f) => {
                if let Some(code) = f.code() {
                    let summary = self.failure_summary(f);
                    self.voice.diagnostic(code, &summary);
                }
                Some(End::Failed(ErrorCode::ExecutionFailed))
            }
            Ok(()) if s.calls.is_empty() => Some(End::Completed),
            Ok(()) => None,
        };
        // The step's text is complete: the redactor's held-back tail is judged now.
        s.seg.end(&mut self.voice);
        if let (Some(i), false) = (s.text_at, s.seg.text.is_empty()) {
            s.items[i] = Item::Assistant {
                text: s.seg.text.clone(),
            };
        }
        // Calls whose entries would not fit what the history can show do not run.
        let stopped = stopped.or_else(|| {
            (!self.content.calls_fit(&s.calls, self.cfg.tool_cards)).then(|| {
                self.voice
                    .diagnostic(DiagnosticCode::ContentLimit, CALLS_STOPPED);
                End::Failed(ErrorCode::ContentLimit)
            })
        });
        if let Some(e) = stopped {
            let partial = !matches!(e, End::Completed);
            close_segment(&mut self.voice, &mut s.seg, partial, &mut self.records);
            return self.finish(e);
        }
        // Tool calls separate assistant segments: reconcile the text so far first.
        close_segment(&mut self.voice, &mut s.seg, false, &mut self.records);
        self.start_calls(s.items, s.calls);
    }

    /// A failed step's diagnostic summary: one that may come from a window larger than the
    /// model's (an overflow, or a local server's empty reply) names the setting to fix.
    fn failure_summary(&self, f: StepFailure) -> String {
        match f {
            StepFailure::ContextOverflow | StepFailure::EmptyReply => format!(
                "{}; if the model's context is smaller than {} tokens, set providers.{}.context_window to its size",
                f.summary(),
                self.cfg.context_window,
                self.cfg.provider
            ),
            f => f.summary(),
        }
    }
}
