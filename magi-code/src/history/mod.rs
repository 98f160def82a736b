//! History: strict validation of stored JSONL into typed records, the summary that
//! discovery and reopen need, and the display projection (`docs/history-format.md`).

pub mod compact;
pub mod item;
pub mod projection;
pub mod record;
pub mod replay;
pub mod room;

pub use projection::{chunk, Projection, Projector};
pub use record::{ActivityKind, ActivityState, Body, HistoryError, Record, RunOutcome};
pub use replay::{Item, Replay, ToolSpec};

use crate::store::SessionId;
use crate::util::time::parse_rfc3339;

/// Most entries in one page.
pub const PAGE_ENTRIES: usize = protocol_core::limits::HISTORY_PAGE_ENTRIES;

/// Saved selection preferences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preferences {
    /// Provider.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Requested effort.
    pub effort: String,
}

/// What a validated stored history says besides its projection.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Whether the last line had no LF (an interrupted append, ignored).
    pub torn_tail: bool,
    /// Every non-empty recorded cwd.
    pub cwds: Vec<String>,
    /// Greatest record timestamp (epoch ms).
    pub updated_ms: Option<i64>,
    /// Latest title from `title` or `compaction` records.
    pub title: Option<String>,
    /// Latest saved preferences.
    pub preferences: Option<Preferences>,
    /// Records read.
    pub records: usize,
    /// Turns recorded (`user_input` records).
    pub turns: usize,
}

/// The state derived from one history, extended record by record: the summary and, when
/// projecting, the display projection and the replay. It refuses what a stored read refuses,
/// including the read budget, so extending it equals reading the file afresh.
#[derive(Debug)]
pub struct History {
    id: SessionId,
    summary: Summary,
    projector: Option<Projector>,
    replay: Option<Replay>,
    /// Stored bytes and lines taken.
    bytes: u64,
    lines: usize,
    /// Sticky: the first refusal.
    error: Option<HistoryError>,
}

impl History {
    /// The state of an empty history of `id`; `project` keeps the projection and replay too.
    #[must_use]
    pub fn new(id: &SessionId, project: bool) -> Self {
        Self {
            id: id.clone(),
            summary: Summary::default(),
            projector: project.then(Projector::default),
            replay: project.then(Replay::default),
            bytes: 0,
            lines: 0,
            error: None,
        }
    }

    /// Projects `tool_card` entries from now on (the child negotiated `tool.cards`); call
    /// before the first record.
    pub fn show_cards(&mut self, cards: bool) {
        if let Some(p) = &mut self.projector {
            *p = Projector::with_cards(cards);
        }
    }

    /// Takes one complete stored line (LF excluded).
    pub fn line(&mut self, line: &[u8]) -> Result<(), HistoryError> {
        match Record::parse(line) {
            Ok(r) => self.push(&r, line.len() + 1),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Takes one record whose stored line is `bytes` long (LF included).
    pub fn push(&mut self, r: &Record, bytes: usize) -> Result<(), HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.record(r, bytes).map_err(|e| self.fail(e))
    }

    /// Sticks `e` and frees what no longer can be used.
    fn fail(&mut self, e: HistoryError) -> HistoryError {
        self.error = Some(e);
        self.projector = None;
        self.replay = None;
        e
    }

    fn record(&mut self, r: &Record, bytes: usize) -> Result<(), HistoryError> {
        self.bytes += bytes as u64;
        self.lines += 1;
        if self.bytes > protocol_core::limits::HISTORY_READ_BYTES
            || self.lines > protocol_core::limits::HISTORY_READ_LINES
        {
            return Err(HistoryError::TooLarge);
        }
        if r.session_id != self.id.as_str() {
            return Err(HistoryError::Invalid);
        }
        let ts = parse_rfc3339(&r.ts).ok_or(HistoryError::Invalid)?;
        let sum = &mut self.summary;
        sum.records += 1;
        sum.updated_ms = Some(sum.updated_ms.map_or(ts, |u| u.max(ts)));
        if let Some(cwd) = r.cwd.as_deref().filter(|c| !c.is_empty()) {
            sum.cwds.push(cwd.to_owned());
        }
        match &r.body {
            Body::UserInput { .. } => sum.turns += 1,
            Body::Title { title } => sum.title = Some(title.clone()),
            Body::Compaction { title: Some(t), .. } => sum.title = Some(t.clone()),
            Body::SessionPreferences {
                provider,
                model,
                effort,
            } => {
                sum.preferences = Some(Preferences {
                    provider: provider.clone(),
                    model: model.clone(),
                    effort: effort.clone(),
                });
            }
            _ => {}
        }
        if let Some(p) = &mut self.projector {
            p.push(r)?;
        }
        if let Some(rp) = &mut self.replay {
            rp.push(r, bytes);
        }
        Ok(())
    }

    /// Ends a read of the stored file: `torn_tail` says its last line had no LF. A turn open
    /// there stays open in the replay (a rebuild under our own running turn).
    pub fn finish_read(&mut self, torn_tail: bool) {
        self.summary.torn_tail = torn_tail;
    }

    /// Closes a turn left open in the stored file as interrupted (see
    /// [`Replay::close_open_turn`]): at open, no live loop owns it.
    pub fn close_open_turn(&mut self) {
        if let Some(rp) = &mut self.replay {
            rp.close_open_turn();
        }
    }

    /// Our own append succeeded: it cut any torn tail first.
    pub fn appended(&mut self) {
        self.summary.torn_tail = false;
    }

    /// Brings the serialized projection `p` up to date (see [`Projector::emit`]).
    pub fn emit(&mut self, p: &mut Projection) -> Result<(), HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let torn = self.summary.torn_tail;
        self.projector
            .as_mut()
            .map_or(Ok(()), |pr| pr.emit(p, torn))
    }

    /// What the history says besides its projection.
    #[must_use]
    pub const fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The replay, unless the history was refused (or is not projected).
    pub fn replay(&self) -> Result<&Replay, HistoryError> {
        match (self.error, &self.replay) {
            (Some(e), _) => Err(e),
            (None, Some(r)) => Ok(r),
            (None, None) => Err(HistoryError::Invalid),
        }
    }

    /// The first refusal, if any.
    #[must_use]
    pub const fn error(&self) -> Option<HistoryError> {
        self.error
    }
}

/// Validates a stored history line by line and, when asked, builds its projection with
/// memory bounded by the snapshot budget.
#[derive(Debug)]
pub struct Reader {
    history: History,
}

impl Reader {
    /// A reader for session `id`; `project` builds the display projection and replay too.
    #[must_use]
    pub fn new(id: &SessionId, project: bool) -> Self {
        Self {
            history: History::new(id, project),
        }
    }

    /// This reader, projecting `tool_card` entries when `cards` (see [`History::show_cards`]).
    #[must_use]
    pub fn show_cards(mut self, cards: bool) -> Self {
        self.history.show_cards(cards);
        self
    }

    /// Takes one complete line; false stops the read (see [`Self::finish`] for why).
    pub fn line(&mut self, line: &[u8]) -> bool {
        self.history.line(line).is_ok()
    }

    /// Ends the read: the summary and, when asked, the projection.
    pub fn finish(self, torn_tail: bool) -> Result<(Summary, Option<Projection>), HistoryError> {
        let projecting = self.history.projector.is_some();
        let (h, p) = self.finish_state(torn_tail)?;
        Ok((h.summary, projecting.then_some(p)))
    }

    /// Ends the read keeping the state, to be extended by later appends, and its projection.
    pub fn finish_state(self, torn_tail: bool) -> Result<(History, Projection), HistoryError> {
        let mut h = self.history;
        h.finish_read(torn_tail);
        let mut p = Projection::default();
        h.emit(&mut p)?;
        Ok((h, p))
    }
}

/// Reads a whole history held in memory (tests, tools): lines, torn tail, projection.
pub fn read_bytes(bytes: &[u8], id: &SessionId) -> Result<(Summary, Projection), HistoryError> {
    let (h, p) = read_state(bytes, id)?;
    Ok((h.summary, p))
}

/// Reads a whole history held in memory into its state and projection, its replay closed as
/// a stored conversation (a turn open in it was interrupted).
pub fn read_state(bytes: &[u8], id: &SessionId) -> Result<(History, Projection), HistoryError> {
    let mut r = Reader::new(id, true);
    let (complete, torn) = match memchr::memrchr(b'\n', bytes) {
        Some(i) => (&bytes[..=i], i + 1 < bytes.len()),
        None => (&bytes[..0], !bytes.is_empty()),
    };
    if !complete.is_empty() {
        for line in complete[..complete.len() - 1].split(|b| *b == b'\n') {
            if !r.line(line) {
                break;
            }
        }
    }
    let (mut h, p) = r.finish_state(torn)?;
    h.close_open_turn();
    Ok((h, p))
}

/// A display title: at most 256 input bytes, sanitized, cut to 50 characters; unsafe → None.
#[must_use]
pub fn display_title(raw: &str) -> Option<String> {
    if raw.len() > protocol_core::limits::DISCOVERY_TITLE_BYTES
        || raw.chars().any(char::is_control)
        || crate::util::redact::is_secret_like(raw)
    {
        return None;
    }
    let t: String = raw.trim().chars().take(50).collect();
    (!t.is_empty()).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn id() -> SessionId {
        SessionId::new("s1").unwrap()
    }

    fn lines(v: &[Value]) -> Vec<u8> {
        let mut b = Vec::new();
        for r in v {
            b.extend(serde_json::to_vec(r).unwrap());
            b.push(b'\n');
        }
        b
    }

    const TS: &str = "2026-11-30T12:00:00Z";

    #[test]
    fn projection_rules() {
        let recs = lines(&[
            json!({"type":"session_meta","session_id":"s1","ts":TS,"cwd":"/w"}),
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r1","message_id":"u1","text":"hi"}),
            json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"he"}),
            json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r1","item_id":"i","text":"old","provider_summary":true}),
            json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r1","text":"hidden"}),
            json!({"type":"activity","session_id":"s1","ts":TS,"run_id":"r1","activity_id":"t1","kind":"tool","state":"started","name":"shell","summary":"ls"}),
            json!({"type":"activity","session_id":"s1","ts":TS,"run_id":"r1","activity_id":"t1","kind":"tool","state":"completed","name":"shell","summary":"ls"}),
            json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r1","item_id":"i","text":"new","provider_summary":true}),
            json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"llo"}),
            json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"hello"}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r1","outcome":"completed"}),
        ]);
        let (_, pr) = read_bytes(&recs, &id()).unwrap();
        let e: Vec<Value> = pr
            .entries
            .iter()
            .map(|x| serde_json::from_str(x).unwrap())
            .collect();
        let kinds: Vec<&str> = e.iter().map(|x| x["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["user", "assistant", "reasoning_summary", "activity"]
        );
        assert_eq!(e[1]["text"], "hello");
        assert_eq!(e[2]["text"], "new");
        assert_eq!(e[3]["partial"], false);
        assert!(pr.complete);
    }

    #[test]
    fn interrupted_turns_are_partial() {
        let mut recs = lines(&[
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r1","text":"hi"}),
            json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"he"}),
        ]);
        recs.extend_from_slice(b"{\"type\":\"assistant_ch");
        let (sum, pr) = read_bytes(&recs, &id()).unwrap();
        assert!(sum.torn_tail);
        assert!(!pr.complete);
        let last: Value = serde_json::from_str(pr.entries.last().unwrap()).unwrap();
        assert_eq!(last["kind"], "diagnostic");
        assert_eq!(last["partial"], true);
        let a: Value = serde_json::from_str(&pr.entries[1]).unwrap();
        assert_eq!(
            (a["text"].as_str(), a["partial"].as_bool()),
            (Some("he"), Some(true))
        );
    }

    #[test]
    fn malformed_histories() {
        let ok = json!({"type":"title","session_id":"s1","ts":TS,"title":"t"});
        assert!(read_bytes(&lines(std::slice::from_ref(&ok)), &id()).is_ok());
        for bad in [
            json!({"type":"title","session_id":"other","ts":TS,"title":"t"}),
            json!({"type":"diagnostic","session_id":"s1","ts":TS,"code":"x","summary":"y"}),
            json!({"type":"nope","session_id":"s1","ts":TS}),
            json!({"type":"title","session_id":"s1","ts":"yesterday","title":"t"}),
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r"}),
            json!([1]),
        ] {
            assert!(
                read_bytes(&lines(&[ok.clone(), bad.clone()]), &id()).is_err(),
                "{bad}"
            );
        }
        let mut blank = lines(std::slice::from_ref(&ok));
        blank.extend_from_slice(b"\n");
        blank.extend(lines(std::slice::from_ref(&ok)));
        assert_eq!(
            read_bytes(&blank, &id()).unwrap_err(),
            HistoryError::Invalid
        );
        assert!(read_bytes(b"not json\n", &id()).is_err());
        assert_eq!(read_bytes(b"", &id()).unwrap().0.records, 0);
    }

    fn entries(p: &Projection) -> Vec<Value> {
        p.entries
            .iter()
            .map(|x| serde_json::from_str(x).unwrap())
            .collect()
    }

    #[test]
    fn failed_and_cancelled_runs_project_a_diagnostic() {
        let recs = lines(&[
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r1","text":"hi"}),
            json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"par","partial":true}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r1","outcome":"failed","error_code":"execution_failed"}),
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r2","text":"again"}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r2","outcome":"cancelled"}),
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r3","text":"more"}),
            json!({"type":"tool_call","session_id":"s1","ts":TS,"run_id":"r3","call_id":"c","name":"n","input":{}}),
            json!({"type":"tool_result","session_id":"s1","ts":TS,"run_id":"r3","call_id":"c","output":"secret output","is_error":false}),
            json!({"type":"provider_item","session_id":"s1","ts":TS,"run_id":"r3","provider":"p","item":{"x":1}}),
            json!({"type":"usage","session_id":"s1","ts":TS,"run_id":"r3","input_tokens":5,"output_tokens":6}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r3","outcome":"failed","error_code":"sk-not-a-code"}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r3","outcome":"failed","error_code":"content_limit"}),
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r4","text":"ok"}),
            json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":"r4","message_id":"a4","text":"fine"}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r4","outcome":"completed"}),
        ]);
        let (_, pr) = read_bytes(&recs, &id()).unwrap();
        let got: Vec<(String, String, bool)> = entries(&pr)
            .iter()
            .map(|e| {
                (
                    e["kind"].as_str().unwrap().to_owned(),
                    e["text"].as_str().unwrap().to_owned(),
                    e["partial"].as_bool().unwrap(),
                )
            })
            .collect();
        let want = [
            ("user", "hi", false),
            ("assistant", "par", true),
            ("diagnostic", "The turn failed: execution_failed.", false),
            ("user", "again", false),
            ("diagnostic", "The turn was cancelled.", false),
            ("user", "more", false),
            // Stored text that is not a known code is never echoed; a repeated
            // run_finished adds nothing.
            ("diagnostic", "The turn failed.", false),
            ("user", "ok", false),
            ("assistant", "fine", false),
        ];
        let want: Vec<(String, String, bool)> = want
            .iter()
            .map(|(k, t, p)| ((*k).to_owned(), (*t).to_owned(), *p))
            .collect();
        assert_eq!(got, want);
        assert!(pr.complete, "recorded failed/cancelled turns are complete");
    }

    /// Records of many kinds, in an order that changes earlier entries.
    fn varied() -> Vec<Value> {
        let long = "é\"".repeat(9_000);
        let mut v = vec![json!({"type":"session_meta","session_id":"s1","ts":TS,"cwd":"/w"})];
        for n in 0..3 {
            let r = format!("r{n}");
            let outcome = ["completed", "failed", "cancelled"][n];
            v.extend([
                json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":r,"text":format!("q{n}")}),
                json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":r,"message_id":format!("a{n}"),"text":"he"}),
                json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":r,"item_id":"i","text":long,"provider_summary":true}),
                json!({"type":"activity","session_id":"s1","ts":TS,"run_id":r,"activity_id":format!("t{n}"),"kind":"tool","state":"started","name":"shell"}),
                json!({"type":"tool_call","session_id":"s1","ts":TS,"run_id":r,"call_id":"c","name":"shell","input":"{raw"}),
                json!({"type":"tool_result","session_id":"s1","ts":TS,"run_id":r,"call_id":"c","output":"o","is_error":true}),
                json!({"type":"activity","session_id":"s1","ts":TS,"run_id":r,"activity_id":format!("t{n}"),"kind":"tool","state":"failed","name":"shell","summary":"ls"}),
                json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":r,"item_id":"i","text":"short","provider_summary":true}),
                json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":r,"message_id":format!("a{n}"),"text":long}),
                json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":r,"message_id":format!("a{n}"),"text":"hello","partial":n == 1}),
                json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":r,"outcome":outcome,"error_code":"execution_failed"}),
            ]);
        }
        v
    }

    #[test]
    fn extending_equals_reading_afresh() {
        let all = varied();
        let mut h = History::new(&id(), true);
        let mut p = Projection::empty();
        let mut multi = false;
        for (n, v) in all.iter().enumerate() {
            let line = serde_json::to_vec(v).unwrap();
            let r = Record::parse(&line).unwrap();
            h.push(&r, line.len() + 1).unwrap();
            h.emit(&mut p).unwrap();
            let (fresh, fp) = read_state(&lines(&all[..=n]), &id()).unwrap();
            assert_eq!(p, fp, "after record {n}");
            multi |= entries(&p).iter().any(|e| e["part"] == 1);
            // A fresh read closes an open turn; the live state leaves it open.
            let mut closed = h.replay().unwrap().clone();
            closed.close_open_turn();
            assert_eq!(closed.items(), fresh.replay().unwrap().items());
        }
        assert!(p.complete);
        assert_eq!(h.summary().turns, 3);
        assert!(multi, "entries whose part count changed on the way");
    }

    #[test]
    fn an_extended_projection_keeps_the_parts_bound_at_its_edge() {
        let mut h = History::new(&id(), true);
        let mut p = Projection::empty();
        let push = |h: &mut History, v: Value| {
            let line = serde_json::to_vec(&v).unwrap();
            h.push(&Record::parse(&line).unwrap(), line.len() + 1)
        };
        // Two parts of a replaceable summary, then single-part entries up to 10,000 parts.
        let two = "a".repeat(projection::CHUNK_BYTES + 1);
        let three = "a".repeat(2 * projection::CHUNK_BYTES + 1);
        let summary = |t: &str| json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r","item_id":"i","text":t,"provider_summary":true});
        push(&mut h, summary(&two)).unwrap();
        for _ in 0..projection::SNAPSHOT_PARTS - 2 {
            push(
                &mut h,
                json!({"type":"compaction","session_id":"s1","ts":TS}),
            )
            .unwrap();
        }
        h.emit(&mut p).unwrap();
        assert_eq!(p.entries.len(), projection::SNAPSHOT_PARTS);
        push(&mut h, summary(&three)).unwrap();
        assert_eq!(h.emit(&mut p), Err(HistoryError::TooLarge));
        assert_eq!(p.entries.len(), projection::SNAPSHOT_PARTS + 1);
        // Only the changed entry was re-serialized in place; shrinking it fits again.
        push(&mut h, summary(&two)).unwrap();
        h.emit(&mut p).unwrap();
        let fresh = read_state(
            &{
                let mut v = vec![summary(&two)];
                v.extend(
                    (0..projection::SNAPSHOT_PARTS - 2)
                        .map(|_| json!({"type":"compaction","session_id":"s1","ts":TS})),
                );
                lines(&v)
            },
            &id(),
        )
        .unwrap()
        .1;
        assert_eq!(p, fresh);
    }

    #[test]
    fn the_read_budget_sticks_in_the_state() {
        let mut h = History::new(&id(), true);
        let line =
            serde_json::to_vec(&json!({"type":"title","session_id":"s1","ts":TS,"title":"t"}))
                .unwrap();
        let r = Record::parse(&line).unwrap();
        let big = usize::try_from(protocol_core::limits::HISTORY_READ_BYTES).unwrap() - 1;
        h.push(&r, big).unwrap();
        h.push(&r, 1).unwrap();
        assert_eq!(h.push(&r, 1), Err(HistoryError::TooLarge));
        assert_eq!(h.error(), Some(HistoryError::TooLarge));
        assert_eq!(h.replay().unwrap_err(), HistoryError::TooLarge);
        assert_eq!(
            h.emit(&mut Projection::empty()),
            Err(HistoryError::TooLarge)
        );
        let mut h = History::new(&id(), false);
        for _ in 0..protocol_core::limits::HISTORY_READ_LINES {
            h.push(&r, 1).unwrap();
        }
        assert_eq!(h.push(&r, 1), Err(HistoryError::TooLarge));
        let other = Record::now("s2", Body::SessionMeta {});
        let mut h = History::new(&id(), true);
        assert_eq!(h.push(&other, 1), Err(HistoryError::Invalid));
    }
}
