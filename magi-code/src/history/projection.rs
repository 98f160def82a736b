//! The bounded display projection that `history.page` pages through, built record by record.

use super::record::{ActivityState, Body, Record, RunOutcome};
use crate::util::redact::sanitize_text;
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

pub use super::shown::{
    chunk, window, Projection, TurnParts, CHUNK_BYTES, EARLIER_NOT_SHOWN, INTERRUPTED_SUMMARY,
    SNAPSHOT_BYTES, SNAPSHOT_PARTS,
};
use super::shown::{shared, Part};

#[derive(Debug)]
struct Logical {
    kind: &'static str,
    /// Its message number: the file offset of the record that made it, so its serialization
    /// does not depend on what else a projection shows.
    id: u64,
    /// Its raw text: sanitized, chunked and serialized only when parts are asked for (once,
    /// when its turn closes), never per record that changes it.
    text: String,
    /// Bytes of the raw text (what the hold bound counts).
    len: usize,
    partial: bool,
    /// For assistant entries: the reconciled copy arrived; later chunks are ignored.
    reconciled: bool,
    /// For `tool_card` entries: the card (its title is `text`).
    card: Option<Value>,
}

impl Logical {
    fn new(kind: &'static str, id: u64, text: String, partial: bool) -> Self {
        Self {
            kind,
            id,
            len: text.len(),
            text,
            partial,
            reconciled: false,
            card: None,
        }
    }

    /// Bytes held: the text and any card.
    fn held(&self) -> usize {
        self.len + self.card.as_ref().map_or(0, |c| c.to_string().len())
    }

    /// Parts its raw text can fill at most.
    const fn part_count(&self) -> usize {
        self.len / (CHUNK_BYTES - 6) + 1
    }

    /// Its serialized parts: sanitized first, then chunked.
    fn parts(&self) -> Vec<Arc<str>> {
        let text = sanitize_text(&self.text);
        let id = format!("m{}", self.id);
        let mut part = Part {
            card: self.card.as_ref(),
            kind: self.kind,
            last_part: true,
            message_id: &id,
            part: 0,
            partial: self.partial,
            text: &text,
        };
        let mut buf = Vec::with_capacity(text.len().min(CHUNK_BYTES) + ENTRY_OVERHEAD);
        if self.card.is_some() {
            // A card's title is at most 256 bytes: always one part.
            return vec![shared(&mut buf, &part)];
        }
        let parts = chunk(&text);
        let last = parts.len() - 1;
        parts
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                part.text = t;
                part.part = i;
                part.last_part = i == last;
                shared(&mut buf, &part)
            })
            .collect()
    }

    fn set_partial(&mut self, partial: bool) {
        self.partial = partial;
    }
}

/// Bytes of an entry's serialization besides its text, unless the text has escapes: keys,
/// kind, message ID and flags (`{"kind":"reasoning_summary","last_part":false,...}` is ~110).
const ENTRY_OVERHEAD: usize = 128;

/// The fixed summary of the derived entry after a failed or cancelled run; an error code is
/// named only when it is one this backend knows (stored text is never echoed).
fn finished_summary(outcome: RunOutcome, error_code: Option<&str>) -> Option<String> {
    match outcome {
        RunOutcome::Completed => None,
        RunOutcome::Cancelled => Some("The turn was cancelled.".into()),
        RunOutcome::Failed => Some(match error_code.and_then(protocol_core::ErrorCode::parse) {
            Some(c) => format!("The turn failed: {}.", c.as_str()),
            None => "The turn failed.".into(),
        }),
    }
}

/// Builds one turn's projection record by record (`decisions.md` 48: the turn is the unit a
/// projection window shows or leaves out). It holds at most about twice the snapshot budget:
/// past that its oldest entries are dropped (a later record that would change one is ignored),
/// so a turn larger than the budget keeps the newest parts a projection can show.
#[derive(Debug, Default)]
pub struct Projector {
    out: VecDeque<Logical>,
    /// Logical index of `out[0]`: the entries below it were dropped.
    first: usize,
    messages: HashMap<String, usize>,
    summaries: HashMap<(String, String), usize>,
    activities: HashMap<String, usize>,
    /// Whether `tool_card` records are projected (the child negotiated `tool.cards`).
    cards: bool,
    /// Card entries by activity ID.
    card_entries: HashMap<String, usize>,
    /// Runs with `user_input` and no `run_finished` (yet).
    open: HashSet<String>,
    finished: HashSet<String>,
    /// Raw bytes and parts held.
    held: usize,
    held_parts: usize,
    /// The message number of the record being taken.
    id: u64,
}

/// A stored card fit to show: the shape and bounds `tool.cards` promises, else `None` (a
/// history edited by hand shows no card rather than an unbounded one).
fn shown_card(card: &Value) -> Option<(String, bool)> {
    let title = card.get("title")?.as_str()?;
    let kind = card.get("kind")?.as_str()?;
    let status = card.get("status")?.as_str()?;
    let fits = title.len() <= protocol_core::limits::CARD_TITLE_BYTES
        && card.to_string().len() <= protocol_core::limits::CARD_BYTES
        && protocol_core::caps::TOOL_CARD_KINDS.contains(&kind)
        && matches!(status, "running" | "completed" | "failed");
    fits.then(|| (title.to_owned(), status == "running"))
}

/// Where a key leads: a held entry, one already dropped, or none yet.
enum Slot {
    Held(usize),
    Dropped,
    New,
}

impl Projector {
    /// A projector that shows `tool_card` entries (`tool.cards` negotiated) when `cards`.
    #[must_use]
    pub fn with_cards(cards: bool) -> Self {
        Self {
            cards,
            ..Self::default()
        }
    }

    fn slot(&self, i: Option<&usize>) -> Slot {
        match i {
            Some(&i) if i >= self.first => Slot::Held(i),
            Some(_) => Slot::Dropped,
            None => Slot::New,
        }
    }

    fn entry(&mut self, i: usize) -> &mut Logical {
        &mut self.out[i - self.first]
    }

    fn set_text(&mut self, i: usize, text: String) {
        let (old_len, old_parts) = {
            let l = &self.out[i - self.first];
            (l.len, l.part_count())
        };
        let l = self.entry(i);
        l.len = text.len();
        l.text = text;
        let new_parts = l.part_count();
        self.held = self.held - old_len + self.out[i - self.first].len;
        self.held_parts = self.held_parts - old_parts + new_parts;
    }

    fn set_partial(&mut self, i: usize, partial: bool) {
        if self.entry(i).partial != partial {
            self.entry(i).set_partial(partial);
        }
    }

    fn add(&mut self, kind: &'static str, text: String, partial: bool) -> usize {
        let l = Logical::new(kind, self.id, text, partial);
        self.held += l.held();
        self.held_parts += l.part_count();
        self.out.push_back(l);
        self.first + self.out.len() - 1
    }

    /// Drops the oldest entries while more than twice the snapshot budget is held.
    fn trim(&mut self) {
        while self.out.len() > 1
            && (self.held > 2 * SNAPSHOT_BYTES || self.held_parts > 2 * SNAPSHOT_PARTS)
        {
            if let Some(l) = self.out.pop_front() {
                self.held -= l.held();
                self.held_parts -= l.part_count();
                self.first += 1;
            }
        }
    }

    /// Takes the next record of the turn; `id` is its file offset (its entry's number).
    pub fn push(&mut self, r: &Record, id: u64) {
        self.id = id;
        self.apply(r);
        self.trim();
    }

    fn apply(&mut self, r: &Record) {
        match &r.body {
            Body::UserInput { run_id, text, .. } => {
                if !self.finished.contains(run_id) {
                    self.open.insert(run_id.clone());
                }
                self.add("user", text.clone(), false);
            }
            Body::RunFinished {
                run_id,
                outcome,
                error_code,
            } => {
                self.open.remove(run_id);
                if self.finished.insert(run_id.clone()) {
                    if let Some(t) = finished_summary(*outcome, error_code.as_deref()) {
                        self.add("diagnostic", t, false);
                    }
                }
            }
            Body::AssistantChunk {
                message_id, text, ..
            } => self.assistant_chunk(message_id, text),
            Body::AssistantMessage {
                message_id,
                text,
                partial,
                ..
            } => self.assistant_message(message_id, text.as_deref(), *partial),
            Body::ReasoningSummary {
                run_id,
                text,
                item_id,
                provider_summary,
            } => {
                if *provider_summary == Some(true) {
                    self.reasoning_summary(run_id, text.clone(), item_id.as_deref());
                }
            }
            Body::Activity {
                activity_id,
                state,
                name,
                summary,
                ..
            } => self.activity(activity_id, *state, name, summary.as_deref()),
            Body::ToolCard {
                activity_id, card, ..
            } => self.tool_card(activity_id, card),
            Body::Compaction { summary, .. } => {
                let t = summary.as_deref().unwrap_or("history compacted").to_owned();
                self.add("compaction", t, false);
            }
            // Replay-only records are never projected (`runner.md` 4).
            Body::SessionMeta {}
            | Body::SessionPreferences { .. }
            | Body::Title { .. }
            | Body::ToolCall { .. }
            | Body::ToolResult { .. }
            | Body::CellCall { .. }
            | Body::CellResult { .. }
            | Body::ProviderItem { .. }
            | Body::Usage { .. } => {}
        }
    }

    /// A streamed chunk: appended to its message while that is still raw (a reconciled
    /// message has its final text), or the message's first entry.
    fn assistant_chunk(&mut self, message_id: &str, text: &str) {
        match self.slot(self.messages.get(message_id)) {
            Slot::Held(i) => {
                let l = &mut self.out[i - self.first];
                if l.reconciled {
                    return;
                }
                let before = l.part_count();
                l.text.push_str(text);
                l.len = l.text.len();
                let after = l.part_count();
                self.held += text.len();
                self.held_parts = self.held_parts - before + after;
            }
            Slot::Dropped => {}
            Slot::New => {
                let i = self.add("assistant", text.to_owned(), true);
                self.messages.insert(message_id.to_owned(), i);
            }
        }
    }

    /// A reconciled message: its final text (when stored) and partial flag replace the
    /// chunks' entry, or it makes a new one.
    fn assistant_message(&mut self, message_id: &str, text: Option<&str>, partial: bool) {
        match self.slot(self.messages.get(message_id)) {
            Slot::Held(i) => {
                if let Some(t) = text {
                    self.set_text(i, t.to_owned());
                }
                // Legacy output without text keeps its stored chunks.
                self.set_partial(i, partial);
                self.entry(i).reconciled = true;
            }
            Slot::Dropped => {}
            Slot::New => {
                let t = text.unwrap_or_default().to_owned();
                let i = self.add("assistant", t, partial);
                self.entry(i).reconciled = true;
                self.messages.insert(message_id.to_owned(), i);
            }
        }
    }

    /// A provider's reasoning summary: one entry per item id of the run (a later text
    /// replaces it), or a new entry when it has none.
    fn reasoning_summary(&mut self, run_id: &str, t: String, item_id: Option<&str>) {
        let Some(item) = item_id else {
            self.add("reasoning_summary", t, false);
            return;
        };
        let key = (run_id.to_owned(), item.to_owned());
        match self.slot(self.summaries.get(&key)) {
            Slot::Held(i) => self.set_text(i, t),
            Slot::Dropped => {}
            Slot::New => {
                let i = self.add("reasoning_summary", t, false);
                self.summaries.insert(key, i);
            }
        }
    }

    /// An activity's line (`name: state — summary`), one entry per activity id, partial
    /// while it runs.
    fn activity(
        &mut self,
        activity_id: &str,
        state: ActivityState,
        name: &str,
        summary: Option<&str>,
    ) {
        let mut line = format!("{name}: {}", state.as_str());
        if let Some(sum) = summary.filter(|x| !x.is_empty()) {
            line.push_str(" — ");
            line.push_str(sum);
        }
        let partial = state == ActivityState::Started;
        match self.slot(self.activities.get(activity_id)) {
            Slot::Held(i) => {
                self.set_text(i, line);
                self.set_partial(i, partial);
            }
            Slot::Dropped => {}
            Slot::New => {
                let i = self.add("activity", line, partial);
                self.activities.insert(activity_id.to_owned(), i);
            }
        }
    }

    /// A tool card, shown only when cards are on and its activity is held; a later card of
    /// the activity replaces the entry.
    fn tool_card(&mut self, activity_id: &str, card: &Value) {
        let shown = shown_card(card).filter(|_| self.cards);
        let Some((title, running)) = shown else {
            return;
        };
        if !matches!(self.slot(self.activities.get(activity_id)), Slot::Held(_)) {
            return;
        }
        let mut l = Logical::new("tool_card", self.id, title, running);
        l.card = Some(card.clone());
        match self.slot(self.card_entries.get(activity_id)) {
            Slot::Held(i) => {
                let old = &self.out[i - self.first];
                // The entry keeps the number of the card that made it.
                l.id = old.id;
                self.held = self.held - old.held() + l.held();
                self.held_parts = self.held_parts - old.part_count() + l.part_count();
                *self.entry(i) = l;
            }
            Slot::Dropped => {}
            Slot::New => {
                self.held += l.held();
                self.held_parts += l.part_count();
                self.out.push_back(l);
                let i = self.first + self.out.len() - 1;
                self.card_entries.insert(activity_id.to_owned(), i);
            }
        }
    }

    /// Whether a run of the turn has its input but no `run_finished` (yet).
    #[must_use]
    pub fn open(&self) -> bool {
        !self.open.is_empty()
    }

    /// The turn's serialized parts as they stand, oldest first.
    #[must_use]
    pub fn parts(&self) -> TurnParts {
        let mut t = TurnParts::default();
        for l in &self.out {
            for p in l.parts() {
                t.bytes += p.len() + 1;
                t.parts.push(p);
            }
        }
        t
    }

    /// The projection of this one turn alone, as a window holding only it shows it.
    #[must_use]
    pub fn finish(self, torn_tail: bool) -> Projection {
        let interrupted = torn_tail || self.open();
        window(&[self.parts()], false, interrupted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(body: Body) -> Record {
        Record::now("s", body)
    }

    fn card_records(card: Value) -> Vec<Record> {
        vec![
            rec(Body::Activity {
                run_id: "r".into(),
                activity_id: "t".into(),
                kind: super::super::record::ActivityKind::Tool,
                state: ActivityState::Started,
                name: "shell".into(),
                summary: None,
            }),
            rec(Body::ToolCard {
                run_id: "r".into(),
                activity_id: "t".into(),
                card,
            }),
        ]
    }

    fn kinds(cards: bool, records: &[Record]) -> Vec<String> {
        let mut p = Projector::with_cards(cards);
        for (i, r) in records.iter().enumerate() {
            p.push(r, i as u64);
        }
        let out = p.finish(false);
        out.entries
            .iter()
            .map(|e| {
                serde_json::from_str::<Value>(e).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn cards_are_projected_only_when_negotiated_and_within_bounds() {
        let good = json!({"kind": "command", "title": "t", "status": "running", "command": "c"});
        assert_eq!(
            kinds(true, &card_records(good.clone())),
            ["activity", "tool_card"]
        );
        assert_eq!(kinds(false, &card_records(good)), ["activity"]);
        let at = |title: usize, pad: usize| json!({"kind": "generic", "title": "t".repeat(title), "status": "failed", "x": "p".repeat(pad)});
        let base = at(256, 0).to_string().len();
        let fits = protocol_core::limits::CARD_BYTES - base;
        assert_eq!(
            at(256, fits).to_string().len(),
            protocol_core::limits::CARD_BYTES
        );
        assert_eq!(kinds(true, &card_records(at(256, fits))).len(), 2);
        for bad in [
            at(257, 0),
            at(256, fits + 1),
            json!({"kind": "other", "title": "t", "status": "running"}),
            json!({"kind": "generic", "title": "t", "status": "done"}),
            json!({"kind": "generic", "status": "running"}),
        ] {
            assert_eq!(
                kinds(true, &card_records(bad.clone())),
                ["activity"],
                "{bad}"
            );
        }
        let mut orphan = card_records(at(1, 0));
        orphan.remove(0);
        assert!(kinds(true, &orphan).is_empty(), "a card needs its activity");
    }

    /// A Code Mode nested call shows only as its activity (`code-mode.md` 6).
    #[test]
    fn a_code_call_projects_only_through_its_activity() {
        let mut records =
            card_records(json!({"kind": "generic", "title": "t", "status": "running"}));
        records.push(rec(Body::CellCall {
            run_id: "r".into(),
            call_id: "x1".into(),
            seq: 0,
            name: "shell".into(),
            input: json!({"command": "ls"}),
            output: None,
            is_error: None,
        }));
        records.push(rec(Body::CellResult {
            run_id: "r".into(),
            call_id: "x1".into(),
            seq: 0,
            output: "a secret output".into(),
            is_error: false,
        }));
        assert_eq!(kinds(false, &records), ["activity"]);
    }

    fn reply(text: Option<&str>, partial: bool) -> Record {
        rec(Body::AssistantMessage {
            run_id: "r".into(),
            message_id: "a".into(),
            text: text.map(Into::into),
            partial,
        })
    }

    #[test]
    fn a_settled_entry_changed_only_in_its_flag_is_serialized_as_afresh() {
        // Long enough for several parts, with escapes and a secret-like word sanitized away.
        let text = format!(
            "{} sk-abcdefghijklmnopqrstuvwx \"q\"",
            "é\n".repeat(CHUNK_BYTES)
        );
        let mut p = Projector::default();
        p.push(&reply(Some(&text), true), 0);
        assert!(p.parts().parts.len() > 1);
        // A later copy without text (legacy output) only clears the flag.
        p.push(&reply(None, false), 9);
        let mut fresh = Projector::default();
        fresh.push(&reply(Some(&text), false), 0);
        assert_eq!(p.parts(), fresh.parts());
    }

    #[test]
    fn parts_serialize_as_their_json_objects() {
        let card = json!({"kind": "command", "title": "t\"1", "status": "running", "command": "c"});
        let mut l = Logical::new("tool_card", 7, "t\"1".into(), true);
        l.card = Some(card.clone());
        let want = json!({"message_id": "m7", "kind": "tool_card", "text": "t\"1", "partial": true, "part": 0, "last_part": true, "card": card});
        assert_eq!(*l.parts()[0], want.to_string());
        let text = "é\u{1}\n".repeat(CHUNK_BYTES / 2);
        let parts = Logical::new("assistant", 3, text.clone(), false).parts();
        let clean = sanitize_text(&text);
        let chunks = chunk(&clean);
        assert!(chunks.len() > 1);
        for (i, t) in chunks.iter().enumerate() {
            let want = json!({"message_id": "m3", "kind": "assistant", "text": t, "partial": false, "part": i, "last_part": i == chunks.len() - 1});
            assert_eq!(*parts[i], want.to_string());
        }
    }

    #[test]
    fn chunks_respect_utf8_and_escapes() {
        let t = "é".repeat(10_000);
        let parts = chunk(&t);
        assert!(parts.iter().all(|p| p.len() <= CHUNK_BYTES));
        assert_eq!(parts.concat(), t);
        let q = "\"".repeat(10_000);
        let parts = chunk(&q);
        assert_eq!(parts.len(), 2);
        assert!(parts
            .iter()
            .all(|p| serde_json::to_string(p).unwrap().len() <= CHUNK_BYTES + 2));
        let exact = "a".repeat(CHUNK_BYTES);
        assert_eq!(chunk(&exact).len(), 1);
        assert_eq!(chunk(&format!("{exact}a")).len(), 2);
    }
}
