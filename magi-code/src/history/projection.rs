//! The bounded display projection that `history.page` pages through, built record by record.

use super::record::{ActivityState, Body, HistoryError, Record, RunOutcome};
use crate::util::redact::sanitize_text;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Largest text part, raw and escaped.
pub const CHUNK_BYTES: usize = protocol_core::limits::HISTORY_CHUNK_BYTES;
/// Largest serialized projection.
pub const SNAPSHOT_BYTES: usize = protocol_core::limits::HISTORY_SNAPSHOT_BYTES;
/// Most parts in a projection.
pub const SNAPSHOT_PARTS: usize = protocol_core::limits::HISTORY_SNAPSHOT_PARTS;

/// The summary of the derived entry after a turn that never finished durably.
pub const INTERRUPTED_SUMMARY: &str =
    "A turn was interrupted before it finished durably; its reply may be incomplete.";

/// An entry's text: raw while it may still grow (an assistant reply taking chunks), else only
/// its serialized parts, shared with the projection so a long history holds one copy, not two.
#[derive(Debug)]
enum Text {
    Raw(String),
    Parts(Box<[Arc<str>]>),
}

#[derive(Debug)]
struct Logical {
    kind: &'static str,
    text: Text,
    /// Bytes of the raw text (what the hold bound counts).
    len: usize,
    partial: bool,
    /// For assistant entries: the reconciled copy arrived; later chunks are ignored.
    reconciled: bool,
    /// For `tool_card` entries: the card (its title is `text`).
    card: Option<Value>,
}

impl Logical {
    fn new(kind: &'static str, text: String, partial: bool) -> Self {
        Self {
            kind,
            len: text.len(),
            text: Text::Raw(text),
            partial,
            reconciled: false,
            card: None,
        }
    }

    /// Bytes held: the text and any card.
    fn held(&self) -> usize {
        self.len + self.card.as_ref().map_or(0, |c| c.to_string().len())
    }

    /// Its serialized parts as entry `m{n}`: sanitized first, then chunked.
    fn parts(&self, n: usize) -> Vec<Arc<str>> {
        let text = match &self.text {
            Text::Parts(parts) => return parts.to_vec(),
            Text::Raw(text) => sanitize_text(text),
        };
        let mut part = Part {
            card: self.card.as_ref(),
            kind: self.kind,
            last_part: true,
            message_id: n,
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

    /// Keeps only the serialized parts of entry `m{n}` once its text can no longer grow
    /// (every entry but an assistant reply still taking chunks).
    fn settle(&mut self, n: usize) {
        let grows = self.kind == "assistant" && !self.reconciled;
        if !grows && matches!(self.text, Text::Raw(_)) {
            self.text = Text::Parts(self.parts(n).into());
        }
    }

    fn set_partial(&mut self, partial: bool) {
        self.partial = partial;
        // Settled parts are re-serialized with the new flag: the same bytes as serializing
        // the raw text afresh, since the text in them is already sanitized and chunked.
        if let Text::Parts(parts) = &mut self.text {
            for part in parts.iter_mut() {
                if let Ok(mut v) = serde_json::from_str::<Value>(part) {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("partial".into(), Value::Bool(partial));
                    }
                    *part = shared(&mut Vec::with_capacity(part.len()), &v);
                }
            }
        }
    }
}

/// Bytes of an entry's serialization besides its text, unless the text has escapes: keys,
/// kind, message ID and flags (`{"kind":"reasoning_summary","last_part":false,...}` is ~110).
const ENTRY_OVERHEAD: usize = 128;

/// One serialized entry part. The fields are in the order a `Value` object keeps its keys
/// (sorted), so a part re-serialized through a `Value` keeps its bytes.
#[derive(Serialize)]
struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    card: Option<&'a Value>,
    kind: &'a str,
    last_part: bool,
    #[serde(serialize_with = "message_id")]
    message_id: usize,
    part: usize,
    partial: bool,
    text: &'a str,
}

/// Entry `n`'s message ID, `m{n}`.
fn message_id<S: serde::Serializer>(n: &usize, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("m{n}"))
}

/// `v` serialized (through `buf`) into a shared string of just its length: the projection
/// keeps every entry for the session's life.
fn shared<T: Serialize>(buf: &mut Vec<u8>, v: &T) -> Arc<str> {
    buf.clear();
    // Serializing these types into memory cannot fail, and serde_json writes UTF-8.
    let _ = serde_json::to_writer(&mut *buf, v);
    std::str::from_utf8(buf).map_or_else(|_| Arc::from(String::from_utf8_lossy(buf)), Arc::from)
}

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

/// Builds the projection record by record, holding at most about twice the snapshot budget,
/// and serializes into a [`Projection`] only the entries that changed since the last
/// [`Projector::emit`].
#[derive(Debug, Default)]
pub struct Projector {
    out: Vec<Logical>,
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
    held: usize,
    /// Entries already emitted: those below it that changed since are in `dirty`.
    emitted: usize,
    dirty: Vec<usize>,
    /// The entry the record being taken changed, settled once the record is taken.
    changed: Option<usize>,
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

impl Projector {
    /// A projector that shows `tool_card` entries (`tool.cards` negotiated) when `cards`.
    #[must_use]
    pub fn with_cards(cards: bool) -> Self {
        Self {
            cards,
            ..Self::default()
        }
    }

    fn touch(&mut self, i: usize) {
        if i < self.emitted {
            self.dirty.push(i);
        }
    }

    fn set_text(&mut self, i: usize, text: String) -> Result<(), HistoryError> {
        let l = &mut self.out[i];
        self.held = self.held - l.len + text.len();
        l.len = text.len();
        l.text = Text::Raw(text);
        self.touch(i);
        self.changed = Some(i);
        self.check()
    }

    fn set_partial(&mut self, i: usize, partial: bool) {
        if self.out[i].partial != partial {
            self.out[i].set_partial(partial);
            self.touch(i);
        }
    }

    fn add(&mut self, l: Logical) -> Result<usize, HistoryError> {
        self.held += l.held();
        self.out.push(l);
        self.changed = Some(self.out.len() - 1);
        self.check()?;
        Ok(self.out.len() - 1)
    }

    fn check(&self) -> Result<(), HistoryError> {
        if self.out.len() > SNAPSHOT_PARTS || self.held > 2 * SNAPSHOT_BYTES {
            Err(HistoryError::TooLarge)
        } else {
            Ok(())
        }
    }

    /// Takes the next record.
    pub fn push(&mut self, r: &Record) -> Result<(), HistoryError> {
        let taken = self.apply(r);
        if let Some(i) = self.changed.take() {
            if let Some(l) = self.out.get_mut(i) {
                l.settle(i);
            }
        }
        taken
    }

    fn apply(&mut self, r: &Record) -> Result<(), HistoryError> {
        match &r.body {
            Body::UserInput { run_id, text, .. } => {
                if !self.finished.contains(run_id) {
                    self.open.insert(run_id.clone());
                }
                self.add(Logical::new("user", text.clone(), false))?;
            }
            Body::RunFinished {
                run_id,
                outcome,
                error_code,
            } => {
                self.open.remove(run_id);
                if self.finished.insert(run_id.clone()) {
                    if let Some(t) = finished_summary(*outcome, error_code.as_deref()) {
                        self.add(Logical::new("diagnostic", t, false))?;
                    }
                }
            }
            Body::AssistantChunk {
                message_id, text, ..
            } => self.assistant_chunk(message_id, text)?,
            Body::AssistantMessage {
                message_id,
                text,
                partial,
                ..
            } => self.assistant_message(message_id, text.as_deref(), *partial)?,
            Body::ReasoningSummary {
                run_id,
                text,
                item_id,
                provider_summary,
            } => {
                if *provider_summary == Some(true) {
                    self.reasoning_summary(run_id, text.clone(), item_id.as_deref())?;
                }
            }
            Body::Activity {
                activity_id,
                state,
                name,
                summary,
                ..
            } => self.activity(activity_id, *state, name, summary.as_deref())?,
            Body::ToolCard {
                activity_id, card, ..
            } => self.tool_card(activity_id, card)?,
            Body::Compaction { summary, .. } => {
                let t = summary.as_deref().unwrap_or("history compacted").to_owned();
                self.add(Logical::new("compaction", t, false))?;
            }
            // Replay-only records are never projected (`runner.md` 4).
            Body::SessionMeta {}
            | Body::SessionPreferences { .. }
            | Body::Title { .. }
            | Body::ToolCall { .. }
            | Body::ToolResult { .. }
            | Body::CodeCall { .. }
            | Body::ProviderItem { .. }
            | Body::Usage { .. } => {}
        }
        Ok(())
    }

    /// A streamed chunk: appended to its message while that is still raw (a reconciled
    /// message has its final text), or the message's first entry.
    fn assistant_chunk(&mut self, message_id: &str, text: &str) -> Result<(), HistoryError> {
        match self.messages.get(message_id) {
            Some(&i) if self.out[i].reconciled => {}
            Some(&i) => {
                // Not reconciled: its text is still raw.
                if let Text::Raw(t) = &mut self.out[i].text {
                    t.push_str(text);
                    self.out[i].len = t.len();
                    self.held += text.len();
                    self.touch(i);
                    self.changed = Some(i);
                    self.check()?;
                }
            }
            None => {
                let i = self.add(Logical::new("assistant", text.to_owned(), true))?;
                self.messages.insert(message_id.to_owned(), i);
            }
        }
        Ok(())
    }

    /// A reconciled message: its final text (when stored) and partial flag replace the
    /// chunks' entry, or it makes a new one.
    fn assistant_message(
        &mut self,
        message_id: &str,
        text: Option<&str>,
        partial: bool,
    ) -> Result<(), HistoryError> {
        match self.messages.get(message_id) {
            Some(&i) => {
                if let Some(t) = text {
                    self.set_text(i, t.to_owned())?;
                }
                // Legacy output without text keeps its stored chunks.
                self.set_partial(i, partial);
                self.out[i].reconciled = true;
                self.changed = Some(i);
            }
            None => {
                let t = text.unwrap_or_default().to_owned();
                let mut l = Logical::new("assistant", t, partial);
                l.reconciled = true;
                let i = self.add(l)?;
                self.messages.insert(message_id.to_owned(), i);
            }
        }
        Ok(())
    }

    /// A provider's reasoning summary: one entry per item id of the run (a later text
    /// replaces it), or a new entry when it has none.
    fn reasoning_summary(
        &mut self,
        run_id: &str,
        t: String,
        item_id: Option<&str>,
    ) -> Result<(), HistoryError> {
        match item_id {
            Some(item) => {
                let key = (run_id.to_owned(), item.to_owned());
                match self.summaries.get(&key) {
                    Some(&i) => self.set_text(i, t)?,
                    None => {
                        let i = self.add(Logical::new("reasoning_summary", t, false))?;
                        self.summaries.insert(key, i);
                    }
                }
            }
            None => {
                self.add(Logical::new("reasoning_summary", t, false))?;
            }
        }
        Ok(())
    }

    /// An activity's line (`name: state — summary`), one entry per activity id, partial
    /// while it runs.
    fn activity(
        &mut self,
        activity_id: &str,
        state: ActivityState,
        name: &str,
        summary: Option<&str>,
    ) -> Result<(), HistoryError> {
        let mut line = format!("{name}: {}", state.as_str());
        if let Some(sum) = summary.filter(|x| !x.is_empty()) {
            line.push_str(" — ");
            line.push_str(sum);
        }
        let partial = state == ActivityState::Started;
        match self.activities.get(activity_id) {
            Some(&i) => {
                self.set_text(i, line)?;
                self.set_partial(i, partial);
            }
            None => {
                let i = self.add(Logical::new("activity", line, partial))?;
                self.activities.insert(activity_id.to_owned(), i);
            }
        }
        Ok(())
    }

    /// A tool card, shown only when cards are on and its activity is projected; a later card
    /// of the activity replaces the entry.
    fn tool_card(&mut self, activity_id: &str, card: &Value) -> Result<(), HistoryError> {
        let shown = shown_card(card).filter(|_| self.cards);
        let Some((title, running)) = shown else {
            return Ok(());
        };
        if !self.activities.contains_key(activity_id) {
            return Ok(());
        }
        let mut l = Logical::new("tool_card", title, running);
        l.card = Some(card.clone());
        match self.card_entries.get(activity_id) {
            Some(&i) => {
                self.held = self.held - self.out[i].held() + l.held();
                self.out[i] = l;
                self.touch(i);
                self.changed = Some(i);
                self.check()?;
            }
            None => {
                let i = self.add(l)?;
                self.card_entries.insert(activity_id.to_owned(), i);
            }
        }
        Ok(())
    }

    /// Brings `p` up to date: re-serializes the entries that changed, appends the new ones,
    /// and derives the trailing interrupted diagnostic (a torn tail or a turn without
    /// `run_finished` makes the projection partial). `p` must be what this projector emitted
    /// into before (or empty); otherwise it is rebuilt. Over 8 MiB or 10,000 parts is
    /// `TooLarge`, with `p` still consistent so a later emit can continue.
    pub fn emit(&mut self, p: &mut Projection, torn_tail: bool) -> Result<(), HistoryError> {
        if p.layout.len() != self.emitted {
            *p = Projection::default();
            self.emitted = 0;
            self.dirty.clear();
        }
        for _ in 0..std::mem::take(&mut p.tail) {
            if let Some(s) = p.entries.pop() {
                p.bytes -= s.len() + 1;
            }
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for i in dirty {
            p.replace(i, self.out[i].parts(i));
        }
        for i in self.emitted..self.out.len() {
            p.push(self.out[i].parts(i));
        }
        self.emitted = self.out.len();
        let interrupted = torn_tail || !self.open.is_empty();
        if interrupted {
            let l = Logical::new("diagnostic", INTERRUPTED_SUMMARY.into(), true);
            for e in l.parts(self.out.len()) {
                p.bytes += e.len() + 1;
                p.entries.push(e);
                p.tail += 1;
            }
        }
        p.complete = !interrupted;
        if p.entries.len() > SNAPSHOT_PARTS || p.bytes > SNAPSHOT_BYTES {
            return Err(HistoryError::TooLarge);
        }
        Ok(())
    }

    /// Ends the projection in one go (a read that keeps no state).
    pub fn finish(mut self, torn_tail: bool) -> Result<Projection, HistoryError> {
        let mut p = Projection::default();
        self.emit(&mut p, torn_tail)?;
        Ok(p)
    }
}

/// A projection: serialized entries and completeness, with the layout that lets its
/// [`Projector`] re-serialize one logical entry in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    /// Serialized entry objects, in order (shared with the projector's settled entries).
    pub entries: Vec<Arc<str>>,
    /// Whether the projection is complete (no interrupted turn).
    pub complete: bool,
    /// Per logical entry: the index of its first part and its part count.
    layout: Vec<(usize, usize)>,
    /// Trailing parts of the derived interrupted diagnostic.
    tail: usize,
    /// Serialized bytes, one LF per entry included.
    bytes: usize,
}

impl Projection {
    /// Serialized bytes, one LF per entry part included (what the snapshot bound counts).
    #[must_use]
    pub const fn bytes(&self) -> usize {
        self.bytes
    }

    /// The complete projection of a history with nothing in it.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            complete: true,
            ..Self::default()
        }
    }

    fn push(&mut self, parts: Vec<Arc<str>>) {
        self.layout.push((self.entries.len(), parts.len()));
        self.bytes += parts.iter().map(|e| e.len() + 1).sum::<usize>();
        self.entries.extend(parts);
    }

    /// Replaces logical entry `i`'s parts; later entries shift when the count changes.
    fn replace(&mut self, i: usize, parts: Vec<Arc<str>>) {
        let (start, count) = self.layout[i];
        let new = parts.len();
        self.bytes += parts.iter().map(|e| e.len() + 1).sum::<usize>();
        for old in self.entries.splice(start..start + count, parts) {
            self.bytes -= old.len() + 1;
        }
        if new != count {
            self.layout[i].1 = new;
            for l in &mut self.layout[i + 1..] {
                l.0 = l.0 + new - count;
            }
        }
    }
}

/// Splits text into parts whose escaped JSON length (and so raw length) is at most
/// [`CHUNK_BYTES`], never inside a UTF-8 sequence.
#[must_use]
pub fn chunk(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = 0usize;
    for (i, c) in text.char_indices() {
        let w = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if escaped + w > CHUNK_BYTES {
            parts.push(&text[start..i]);
            start = i;
            escaped = 0;
        }
        escaped += w;
    }
    parts.push(&text[start..]);
    parts
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
        for r in records {
            p.push(r).unwrap();
        }
        let out = p.finish(false).unwrap();
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
        records.push(rec(Body::CodeCall {
            run_id: "r".into(),
            call_id: "x1".into(),
            seq: 0,
            name: "shell".into(),
            input: json!({"command": "ls"}),
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
        p.push(&reply(Some(&text), true)).unwrap();
        let mut out = Projection::default();
        p.emit(&mut out, false).unwrap();
        // A later copy without text (legacy output) only clears the flag.
        p.push(&reply(None, false)).unwrap();
        p.emit(&mut out, false).unwrap();
        let mut fresh = Projector::default();
        fresh.push(&reply(Some(&text), false)).unwrap();
        let want = fresh.finish(false).unwrap();
        assert!(want.entries.len() > 1);
        assert_eq!(out, want);
    }

    #[test]
    fn parts_serialize_as_their_json_objects() {
        let card = json!({"kind": "command", "title": "t\"1", "status": "running", "command": "c"});
        let mut l = Logical::new("tool_card", "t\"1".into(), true);
        l.card = Some(card.clone());
        let want = json!({"message_id": "m7", "kind": "tool_card", "text": "t\"1", "partial": true, "part": 0, "last_part": true, "card": card});
        assert_eq!(*l.parts(7)[0], want.to_string());
        let text = "é\u{1}\n".repeat(CHUNK_BYTES / 2);
        let parts = Logical::new("assistant", text.clone(), false).parts(3);
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
