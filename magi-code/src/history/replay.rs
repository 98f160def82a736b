//! Replay: the provider-neutral conversation rebuilt from stored records (`runner.md` 4), never
//! from the display projection, and the tools it offers. Providers build their requests from
//! these types; tools describe themselves with [`ToolSpec`].

use super::compact::{Marks, Snapshot};
use super::record::{Body, Record, RunOutcome};

// The conversation types live in the leaf `item.rs` (compaction builds items too); their
// users name them here, where the replay that makes them is.
pub use super::item::{Item, ToolSpec};

/// The output of a synthetic result for a stored call whose result was never recorded.
pub const INTERRUPTED_RESULT: &str = "no result: the backend stopped";
/// The assistant note after a failed turn that has no reply.
pub const NO_REPLY_FAILED: &str = "no reply: the turn failed";
/// The assistant note after a cancelled turn that has no reply.
pub const NO_REPLY_CANCELLED: &str = "no reply: the turn was cancelled";
/// The assistant note after an interrupted turn (no `run_finished`) that has no reply.
pub const NO_REPLY_INTERRUPTED: &str = "no reply: the turn was interrupted";
/// The assistant note after a completed turn whose model produced no text.
pub const NO_REPLY_EMPTY: &str = "no reply: the turn ended without one";

/// The turn being replayed: its run, and its calls still waiting for a result (call ID and
/// the index of the call's item).
#[derive(Debug, Clone)]
struct Turn {
    run_id: String,
    pending: Vec<(String, usize)>,
}

/// Builds the conversation record by record so that any stored history replays as a valid
/// one: every call answered, and every turn closed by an assistant item (`runner.md` 4, 5).
#[derive(Debug, Clone, Default)]
pub struct Replay {
    items: Vec<Item>,
    turn: Option<Turn>,
    last_input_tokens: Option<u64>,
    bytes_since_usage: u64,
    marks: Marks,
}

impl Replay {
    /// Takes the next stored record; `bytes` is its stored line length (LF included).
    pub fn push(&mut self, r: &Record, bytes: usize) {
        self.marks.push(r, self.items.len());
        if let Body::Compaction {
            summary: Some(_), ..
        } = &r.body
        {
            // The last usage measured the conversation the summary replaced.
            self.last_input_tokens = None;
        }
        if let Body::Usage { input_tokens, .. } = &r.body {
            self.last_input_tokens = Some(*input_tokens);
            self.bytes_since_usage = 0;
            return;
        }
        self.bytes_since_usage = self.bytes_since_usage.saturating_add(bytes as u64);
        if let Body::UserInput { run_id, text, .. } = &r.body {
            self.close(None);
            self.marks.input(self.items.len());
            self.items.push(Item::User { text: text.clone() });
            self.turn = Some(Turn {
                run_id: run_id.clone(),
                pending: Vec::new(),
            });
            return;
        }
        // Only records inside an open turn replay: anything else would break alternation.
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let item = match &r.body {
            Body::AssistantMessage { text: Some(t), .. } if !t.is_empty() => {
                Item::Assistant { text: t.clone() }
            }
            Body::ToolCall {
                call_id,
                name,
                input,
                ..
            } => {
                turn.pending.push((call_id.clone(), self.items.len()));
                Item::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                }
            }
            Body::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => {
                // A result without a waiting call (orphan or duplicate) would be invalid.
                let Some(k) = turn.pending.iter().position(|(c, _)| c == call_id) else {
                    return;
                };
                turn.pending.remove(k);
                Item::ToolResult {
                    call_id: call_id.clone(),
                    output: output.clone(),
                    is_error: *is_error,
                }
            }
            Body::ProviderItem { provider, item, .. } => Item::ProviderItem {
                provider: provider.clone(),
                item: item.clone(),
            },
            Body::RunFinished {
                run_id, outcome, ..
            } => {
                if *run_id == turn.run_id {
                    self.close(Some(*outcome));
                }
                return;
            }
            _ => return,
        };
        self.items.push(item);
    }

    /// Closes a turn still open as interrupted, for a stored history no live loop extends.
    /// (An attachment leaves it open: its own next input or `run_finished` closes it.)
    pub fn close_open_turn(&mut self) {
        self.close(None);
    }

    /// Closes the open turn with its outcome (`None`: interrupted): unanswered calls get a
    /// synthetic error result right after their block of calls and results, and a turn that
    /// does not end with assistant text gets a fixed note.
    fn close(&mut self, outcome: Option<RunOutcome>) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        let mut positions: Vec<usize> = turn.pending.iter().map(|(_, at)| *at).collect();
        for (k, (call_id, _)) in turn.pending.into_iter().enumerate() {
            let mut at = positions[k] + 1;
            while matches!(
                self.items.get(at),
                Some(Item::ToolCall { .. } | Item::ToolResult { .. })
            ) {
                at += 1;
            }
            self.items.insert(
                at,
                Item::ToolResult {
                    call_id,
                    output: INTERRUPTED_RESULT.to_owned(),
                    is_error: true,
                },
            );
            for p in positions.iter_mut().skip(k + 1) {
                if *p >= at {
                    *p += 1;
                }
            }
        }
        if !matches!(self.items.last(), Some(Item::Assistant { .. })) {
            let note = match outcome {
                Some(RunOutcome::Failed) => NO_REPLY_FAILED,
                Some(RunOutcome::Cancelled) => NO_REPLY_CANCELLED,
                Some(RunOutcome::Completed) => NO_REPLY_EMPTY,
                None => NO_REPLY_INTERRUPTED,
            };
            self.items.push(Item::Assistant {
                text: note.to_owned(),
            });
        }
    }

    /// The conversation so far, in order (the open turn as recorded so far).
    #[must_use]
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// The `input_tokens` of the last `usage` record, if any.
    #[must_use]
    pub const fn last_input_tokens(&self) -> Option<u64> {
        self.last_input_tokens
    }

    /// Stored bytes of the records after the last `usage` record (all of them if none).
    #[must_use]
    pub const fn bytes_since_usage(&self) -> u64 {
        self.bytes_since_usage
    }

    /// The files the records' calls wrote or edited, first write first.
    #[must_use]
    pub fn written(&self) -> &[String] {
        &self.marks.written.files
    }

    /// Records seen so far, counted from the session's start.
    #[must_use]
    pub const fn records(&self) -> u64 {
        self.marks.records
    }

    /// What a turn starts from: without a compaction every item and input; after one, its
    /// summary, the inputs before the turn it compacted, that turn's items up to the
    /// `compaction` record, and the items since (`runner.md` 7).
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let m = &self.marks;
        let mut s = Snapshot {
            files: m.written.files.clone(),
            records: m.records,
            inputs: m
                .inputs
                .iter()
                .filter_map(|(_, i)| match self.items.get(*i) {
                    Some(Item::User { text }) => Some(text.clone()),
                    _ => None,
                })
                .collect(),
            last_input_tokens: self.last_input_tokens,
            bytes_since_usage: self.bytes_since_usage,
            ..Snapshot::default()
        };
        let Some((p, at)) = &m.last else {
            s.inputs_before = s.inputs.len();
            s.after = self.items.clone();
            return s;
        };
        let at = (*at).min(self.items.len());
        let start = m
            .inputs
            .iter()
            .find(|(r, _)| *r >= p.through)
            .map_or(self.items.len(), |(_, i)| *i);
        if start <= at {
            s.mid = self.items[start..at].to_vec();
            s.after = self.items[at..].to_vec();
        } else {
            s.after = self.items[start..].to_vec();
        }
        s.summary = Some(p.summary.clone());
        s.inputs_before = m.inputs.iter().filter(|(r, _)| *r < p.through).count();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(run: &str, text: &str) -> Body {
        Body::UserInput {
            run_id: run.into(),
            message_id: None,
            text: text.into(),
        }
    }

    fn reply(run: &str, text: &str) -> Body {
        Body::AssistantMessage {
            run_id: run.into(),
            message_id: format!("a-{text}"),
            text: Some(text.into()),
            partial: false,
        }
    }

    fn call(run: &str, id: &str) -> Body {
        Body::ToolCall {
            run_id: run.into(),
            call_id: id.into(),
            name: "read_file".into(),
            input: json!({"path": id}),
        }
    }

    fn result(run: &str, id: &str) -> Body {
        Body::ToolResult {
            run_id: run.into(),
            call_id: id.into(),
            output: format!("out {id}"),
            is_error: false,
        }
    }

    fn finished(run: &str, outcome: RunOutcome) -> Body {
        Body::RunFinished {
            run_id: run.into(),
            outcome,
            error_code: None,
        }
    }

    fn replay(bodies: Vec<Body>, read: bool) -> Replay {
        let mut r = Replay::default();
        for b in bodies {
            r.push(&Record::now("s", b), 10);
        }
        if read {
            r.close_open_turn();
        }
        r
    }

    fn u(t: &str) -> Item {
        Item::User { text: t.into() }
    }

    fn a(t: &str) -> Item {
        Item::Assistant { text: t.into() }
    }

    fn tc(id: &str) -> Item {
        Item::ToolCall {
            call_id: id.into(),
            name: "read_file".into(),
            input: json!({"path": id}),
        }
    }

    fn tr(id: &str) -> Item {
        Item::ToolResult {
            call_id: id.into(),
            output: format!("out {id}"),
            is_error: false,
        }
    }

    fn lost(id: &str) -> Item {
        Item::ToolResult {
            call_id: id.into(),
            output: INTERRUPTED_RESULT.into(),
            is_error: true,
        }
    }

    /// User and assistant alternate: no two user items without an assistant between them,
    /// and every turn ends with assistant text.
    fn alternates(items: &[Item]) -> bool {
        let mut last_user = false;
        for (i, it) in items.iter().enumerate() {
            match it {
                Item::User { .. } => {
                    if last_user || (i > 0 && !matches!(items[i - 1], Item::Assistant { .. })) {
                        return false;
                    }
                    last_user = true;
                }
                Item::Assistant { .. } => last_user = false,
                _ => {}
            }
        }
        matches!(items.last(), None | Some(Item::Assistant { .. }))
    }

    #[test]
    fn a_completed_loop_replays_as_recorded() {
        let r = replay(
            vec![
                Body::SessionMeta {},
                user("r1", "q"),
                Body::ProviderItem {
                    run_id: "r1".into(),
                    provider: "anthropic".into(),
                    item: json!({"type":"thinking","signature":"x"}),
                },
                reply("r1", "looking"),
                call("r1", "c1"),
                call("r1", "c2"),
                result("r1", "c1"),
                result("r1", "c2"),
                Body::ProviderItem {
                    run_id: "r1".into(),
                    provider: "openai".into(),
                    item: json!({"type":"reasoning","encrypted_content":"e"}),
                },
                reply("r1", "done"),
                finished("r1", RunOutcome::Completed),
            ],
            true,
        );
        let items = r.items();
        assert_eq!(items.len(), 9);
        assert_eq!(items[0], u("q"));
        assert!(
            matches!(&items[1], Item::ProviderItem { provider, .. } if provider == "anthropic")
        );
        assert_eq!(
            &items[2..7],
            &[a("looking"), tc("c1"), tc("c2"), tr("c1"), tr("c2")]
        );
        assert!(matches!(&items[7], Item::ProviderItem { provider, .. } if provider == "openai"));
        assert_eq!(items[8], a("done"));
    }

    #[test]
    fn a_crash_mid_loop_answers_its_calls_and_notes_the_interruption() {
        // kill -9 after the calls and one result: no run_finished, no more records.
        let bodies = vec![
            user("r1", "q"),
            call("r1", "c1"),
            call("r1", "c2"),
            result("r1", "c1"),
        ];
        let r = replay(bodies.clone(), true);
        let want = [
            u("q"),
            tc("c1"),
            tc("c2"),
            tr("c1"),
            lost("c2"),
            a(NO_REPLY_INTERRUPTED),
        ];
        assert_eq!(r.items(), &want);
        // The live loop's open turn is not closed until the read ends.
        assert_eq!(replay(bodies.clone(), false).items(), &want[..4]);
        // The next turn closes it the same way.
        let mut more = bodies;
        more.extend([
            user("r2", "again"),
            reply("r2", "ok"),
            finished("r2", RunOutcome::Completed),
        ]);
        let r = replay(more, true);
        assert_eq!(&r.items()[..6], &want);
        assert_eq!(&r.items()[6..], &[u("again"), a("ok")]);
        assert!(alternates(r.items()));
    }

    #[test]
    fn synthetic_results_follow_their_own_block_of_calls() {
        // A call left unanswered before a later step (a broken writer): its result goes right
        // after its block, before the later text, so the call is answered at once.
        let r = replay(
            vec![
                user("r1", "q"),
                call("r1", "c1"),
                reply("r1", "moving on"),
                call("r1", "c2"),
                finished("r1", RunOutcome::Failed),
            ],
            true,
        );
        assert_eq!(
            r.items(),
            &[
                u("q"),
                tc("c1"),
                lost("c1"),
                a("moving on"),
                tc("c2"),
                lost("c2"),
                a(NO_REPLY_FAILED)
            ]
        );
    }

    #[test]
    fn orphan_and_duplicate_results_are_dropped() {
        let r = replay(
            vec![
                user("r1", "q"),
                result("r1", "c0"),
                call("r1", "c1"),
                result("r1", "c1"),
                result("r1", "c1"),
                reply("r1", "ok"),
                finished("r1", RunOutcome::Completed),
                result("r1", "c1"),
            ],
            true,
        );
        assert_eq!(r.items(), &[u("q"), tc("c1"), tr("c1"), a("ok")]);
    }

    #[test]
    fn failed_and_cancelled_turns_keep_alternating() {
        let r = replay(
            vec![
                user("r1", "one"),
                finished("r1", RunOutcome::Failed),
                user("r2", "two"),
                finished("r2", RunOutcome::Failed),
                user("r3", "three"),
                call("r3", "c1"),
                result("r3", "c1"),
                finished("r3", RunOutcome::Cancelled),
                user("r4", "four"),
                Body::AssistantMessage {
                    run_id: "r4".into(),
                    message_id: "m".into(),
                    text: Some("cut sh".into()),
                    partial: true,
                },
                finished("r4", RunOutcome::Failed),
                user("r5", "five"),
                finished("r5", RunOutcome::Completed),
            ],
            true,
        );
        assert_eq!(
            r.items(),
            &[
                u("one"),
                a(NO_REPLY_FAILED),
                u("two"),
                a(NO_REPLY_FAILED),
                u("three"),
                tc("c1"),
                tr("c1"),
                a(NO_REPLY_CANCELLED),
                u("four"),
                a("cut sh"),
                u("five"),
                a(NO_REPLY_EMPTY),
            ]
        );
        assert!(alternates(r.items()));
    }

    #[test]
    fn records_outside_a_turn_and_empty_text_are_skipped() {
        let r = replay(
            vec![
                call("r0", "c0"),
                reply("r0", "stray"),
                user("r1", "q"),
                reply("r1", ""),
                Body::AssistantMessage {
                    run_id: "r1".into(),
                    message_id: "legacy".into(),
                    text: None,
                    partial: false,
                },
                reply("r1", "a"),
                finished("other", RunOutcome::Failed),
                finished("r1", RunOutcome::Completed),
                reply("r1", "late"),
            ],
            true,
        );
        assert_eq!(r.items(), &[u("q"), a("a")]);
    }

    #[test]
    fn usage_counters() {
        let mut r = Replay::default();
        assert_eq!((r.last_input_tokens(), r.bytes_since_usage()), (None, 0));
        r.push(&Record::now("s", user("r1", "q")), 7);
        assert_eq!((r.last_input_tokens(), r.bytes_since_usage()), (None, 7));
        let usage = |n| Body::Usage {
            run_id: "r1".into(),
            input_tokens: n,
            output_tokens: 1,
            cached_input_tokens: None,
            cache_creation_input_tokens: None,
        };
        r.push(&Record::now("s", usage(100)), 50);
        assert_eq!(
            (r.last_input_tokens(), r.bytes_since_usage()),
            (Some(100), 0)
        );
        r.push(&Record::now("s", reply("r1", "x")), 30);
        r.push(&Record::now("s", finished("r1", RunOutcome::Completed)), 20);
        assert_eq!(
            (r.last_input_tokens(), r.bytes_since_usage()),
            (Some(100), 50)
        );
        r.push(&Record::now("s", usage(u64::MAX)), 50);
        assert_eq!(
            (r.last_input_tokens(), r.bytes_since_usage()),
            (Some(u64::MAX), 0)
        );
        assert_eq!(r.items(), &[u("q"), a("x")]);
    }
}
