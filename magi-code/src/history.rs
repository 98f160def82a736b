//! History records: strict validation of stored JSONL, and the bounded display projection
//! that `history.page` pages through.

use crate::redact::sanitize_text;
use crate::store::{parse_rfc3339, SessionId};
use protocol_core::json::parse_strict;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

/// Largest text part, raw and escaped.
pub const CHUNK_BYTES: usize = 16_384;
/// Largest serialized projection.
pub const SNAPSHOT_BYTES: usize = 8 << 20;
/// Most parts in a projection.
pub const SNAPSHOT_PARTS: usize = 10_000;
/// Most entries in one page.
pub const PAGE_ENTRIES: usize = 100;

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

const EFFORTS: [&str; 6] = ["default", "low", "medium", "high", "xhigh", "max"];

fn s<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}
fn check_record(m: &Map<String, Value>) -> Option<()> {
    let need = |k: &str| s(m, k).map(|_| ());
    let opt_str = |k: &str| match m.get(k) {
        None | Some(Value::Null) | Some(Value::String(_)) => Some(()),
        _ => None,
    };
    match s(m, "type")? {
        "session_meta" => opt_str("cwd")?,
        "user_input" => {
            need("run_id")?;
            opt_str("message_id")?;
            need("text")?;
        }
        "assistant_chunk" => {
            need("run_id")?;
            need("message_id")?;
            need("text")?;
        }
        "assistant_message" => {
            need("run_id")?;
            need("message_id")?;
            opt_str("text")?;
        }
        "reasoning_summary" => {
            need("run_id")?;
            need("text")?;
            opt_str("item_id")?;
            match m.get("provider_summary") {
                None | Some(Value::Bool(_)) => {}
                _ => return None,
            }
        }
        "activity" => {
            need("run_id")?;
            need("activity_id")?;
            need("name")?;
            opt_str("summary")?;
            matches!(s(m, "kind")?, "tool" | "subagent" | "compaction").then_some(())?;
            matches!(s(m, "state")?, "started" | "completed" | "failed").then_some(())?;
        }
        "session_preferences" => {
            need("provider")?;
            need("model")?;
            EFFORTS.contains(&s(m, "effort")?).then_some(())?;
        }
        "title" => need("title")?,
        "compaction" => {
            opt_str("summary")?;
            opt_str("title")?;
        }
        "run_finished" => {
            need("run_id")?;
            matches!(s(m, "outcome")?, "completed" | "cancelled" | "failed").then_some(())?;
        }
        // Stored reads reject diagnostics; unknown types fail closed.
        _ => return None,
    }
    opt_str("cwd")
}

/// Why a stored history was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryError {
    /// Malformed (`session_invalid`).
    Invalid,
    /// Over the projection budget (`history_limit`).
    TooLarge,
}

/// Validates a stored history line by line and, when asked, builds its projection with
/// memory bounded by the snapshot budget.
#[derive(Debug)]
pub struct Reader<'a> {
    id: &'a SessionId,
    summary: Summary,
    projector: Option<Projector>,
    error: Option<HistoryError>,
}

impl<'a> Reader<'a> {
    /// A reader for session `id`; `project` builds the display projection too.
    #[must_use]
    pub fn new(id: &'a SessionId, project: bool) -> Self {
        Self {
            id,
            summary: Summary::default(),
            projector: project.then(Projector::default),
            error: None,
        }
    }

    /// Takes one complete line; false stops the read (see [`Self::finish`] for why).
    pub fn line(&mut self, line: &[u8]) -> bool {
        match self.record(line) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn record(&mut self, line: &[u8]) -> Result<(), HistoryError> {
        let (v, dups) = parse_strict(line).map_err(|_| HistoryError::Invalid)?;
        if !dups.top.is_empty() || dups.nested {
            return Err(HistoryError::Invalid);
        }
        let Value::Object(m) = v else {
            return Err(HistoryError::Invalid);
        };
        if s(&m, "session_id") != Some(self.id.as_str()) {
            return Err(HistoryError::Invalid);
        }
        let ts = s(&m, "ts")
            .and_then(parse_rfc3339)
            .ok_or(HistoryError::Invalid)?;
        check_record(&m).ok_or(HistoryError::Invalid)?;
        let sum = &mut self.summary;
        sum.records += 1;
        if s(&m, "type") == Some("user_input") {
            sum.turns += 1;
        }
        sum.updated_ms = Some(sum.updated_ms.map_or(ts, |u| u.max(ts)));
        if let Some(cwd) = s(&m, "cwd").filter(|c| !c.is_empty()) {
            sum.cwds.push(cwd.to_owned());
        }
        match s(&m, "type") {
            Some("title") => sum.title = s(&m, "title").map(str::to_owned),
            Some("compaction") => {
                if let Some(t) = s(&m, "title") {
                    sum.title = Some(t.to_owned());
                }
            }
            Some("session_preferences") => {
                sum.preferences = Some(Preferences {
                    provider: s(&m, "provider").unwrap_or_default().to_owned(),
                    model: s(&m, "model").unwrap_or_default().to_owned(),
                    effort: s(&m, "effort").unwrap_or("default").to_owned(),
                });
            }
            _ => {}
        }
        if let Some(p) = &mut self.projector {
            p.push(&m)?;
        }
        Ok(())
    }

    /// Ends the read: the summary and, when asked, the projection.
    pub fn finish(
        mut self,
        torn_tail: bool,
    ) -> Result<(Summary, Option<Projection>), HistoryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.summary.torn_tail = torn_tail;
        let projection = match self.projector.take() {
            Some(p) => Some(p.finish(torn_tail)?),
            None => None,
        };
        Ok((self.summary, projection))
    }
}

/// Reads a whole history held in memory (tests, tools): lines, torn tail, projection.
pub fn read_bytes(bytes: &[u8], id: &SessionId) -> Result<(Summary, Projection), HistoryError> {
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
    let (sum, p) = r.finish(torn)?;
    Ok((sum, p.unwrap_or_default()))
}

/// A display title: at most 256 input bytes, sanitized, cut to 50 characters; unsafe → None.
#[must_use]
pub fn display_title(raw: &str) -> Option<String> {
    if raw.len() > 256 || raw.chars().any(char::is_control) || crate::redact::is_secret_like(raw) {
        return None;
    }
    let t: String = raw.trim().chars().take(50).collect();
    (!t.is_empty()).then_some(t)
}

#[derive(Debug)]
struct Logical {
    kind: &'static str,
    text: String,
    partial: bool,
    /// For assistant entries: the reconciled copy arrived; later chunks are ignored.
    reconciled: bool,
}

/// Builds the projection record by record, holding at most about twice the snapshot budget.
#[derive(Debug, Default)]
pub struct Projector {
    out: Vec<Logical>,
    messages: HashMap<String, usize>,
    summaries: HashMap<(String, String), usize>,
    activities: HashMap<String, usize>,
    runs: Vec<String>,
    finished: HashSet<String>,
    held: usize,
}

impl Projector {
    fn set_text(&mut self, i: usize, text: String) -> Result<(), HistoryError> {
        self.held = self.held - self.out[i].text.len() + text.len();
        self.out[i].text = text;
        self.check()
    }

    fn add(&mut self, l: Logical) -> Result<usize, HistoryError> {
        self.held += l.text.len();
        self.out.push(l);
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

    fn push(&mut self, r: &Map<String, Value>) -> Result<(), HistoryError> {
        let run = s(r, "run_id").unwrap_or_default();
        let text = s(r, "text").unwrap_or_default();
        match s(r, "type") {
            Some("user_input") => {
                self.runs.push(run.to_owned());
                self.add(Logical {
                    kind: "user",
                    text: text.to_owned(),
                    partial: false,
                    reconciled: false,
                })?;
            }
            Some("run_finished") => {
                self.finished.insert(run.to_owned());
            }
            Some("assistant_chunk") => {
                let id = s(r, "message_id").unwrap_or_default();
                match self.messages.get(id) {
                    Some(&i) if self.out[i].reconciled => {}
                    Some(&i) => {
                        let mut t = std::mem::take(&mut self.out[i].text);
                        self.held -= t.len();
                        t.push_str(text);
                        self.set_text(i, t)?;
                    }
                    None => {
                        let i = self.add(Logical {
                            kind: "assistant",
                            text: text.to_owned(),
                            partial: true,
                            reconciled: false,
                        })?;
                        self.messages.insert(id.to_owned(), i);
                    }
                }
            }
            Some("assistant_message") => {
                let id = s(r, "message_id").unwrap_or_default();
                let reconciled = r.get("text").is_some_and(Value::is_string);
                match self.messages.get(id) {
                    Some(&i) => {
                        if reconciled {
                            self.set_text(i, text.to_owned())?;
                        }
                        // Legacy output without text keeps its stored chunks.
                        self.out[i].partial = false;
                        self.out[i].reconciled = true;
                    }
                    None => {
                        let i = self.add(Logical {
                            kind: "assistant",
                            text: text.to_owned(),
                            partial: false,
                            reconciled: true,
                        })?;
                        self.messages.insert(id.to_owned(), i);
                    }
                }
            }
            Some("reasoning_summary") => {
                if r.get("provider_summary") != Some(&Value::Bool(true)) {
                    return Ok(());
                }
                let l = Logical {
                    kind: "reasoning_summary",
                    text: text.to_owned(),
                    partial: false,
                    reconciled: false,
                };
                match s(r, "item_id") {
                    Some(item) => match self.summaries.get(&(run.to_owned(), item.to_owned())) {
                        Some(&i) => self.set_text(i, l.text)?,
                        None => {
                            let i = self.add(l)?;
                            self.summaries.insert((run.to_owned(), item.to_owned()), i);
                        }
                    },
                    None => {
                        self.add(l)?;
                    }
                }
            }
            Some("activity") => {
                let state = s(r, "state").unwrap_or_default();
                let mut line = format!("{}: {}", s(r, "name").unwrap_or_default(), state);
                if let Some(sum) = s(r, "summary").filter(|x| !x.is_empty()) {
                    line.push_str(" — ");
                    line.push_str(sum);
                }
                let partial = state == "started";
                let key = s(r, "activity_id").unwrap_or_default();
                match self.activities.get(key) {
                    Some(&i) => {
                        self.set_text(i, line)?;
                        self.out[i].partial = partial;
                    }
                    None => {
                        let i = self.add(Logical {
                            kind: "activity",
                            text: line,
                            partial,
                            reconciled: false,
                        })?;
                        self.activities.insert(key.to_owned(), i);
                    }
                }
            }
            Some("compaction") => {
                let t = s(r, "summary").unwrap_or("history compacted").to_owned();
                self.add(Logical {
                    kind: "compaction",
                    text: t,
                    partial: false,
                    reconciled: false,
                })?;
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self, torn_tail: bool) -> Result<Projection, HistoryError> {
        let interrupted = torn_tail || self.runs.iter().any(|r| !self.finished.contains(r));
        if interrupted {
            self.add(Logical {
                kind: "diagnostic",
                text: "A turn was interrupted before it finished durably; its reply may be incomplete.".into(),
                partial: true,
                reconciled: false,
            })?;
        }
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        for (n, l) in self.out.iter().enumerate() {
            let text = sanitize_text(&l.text);
            let parts = chunk(&text);
            let last = parts.len() - 1;
            for (i, part) in parts.into_iter().enumerate() {
                let e = json!({
                    "message_id": format!("m{n}"),
                    "kind": l.kind,
                    "text": part,
                    "partial": l.partial,
                    "part": i,
                    "last_part": i == last,
                });
                let ser = e.to_string();
                bytes += ser.len() + 1;
                entries.push(ser);
                if entries.len() > SNAPSHOT_PARTS || bytes > SNAPSHOT_BYTES {
                    return Err(HistoryError::TooLarge);
                }
            }
        }
        Ok(Projection {
            entries,
            complete: !interrupted,
        })
    }
}

/// An immutable projection: serialized entries and completeness.
#[derive(Debug, Clone, Default)]
pub struct Projection {
    /// Serialized entry objects, in order.
    pub entries: Vec<String>,
    /// Whether the projection is complete (no interrupted turn).
    pub complete: bool,
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
}
