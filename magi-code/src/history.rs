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
/// Largest serialized `history.page` result.
pub const PAGE_BYTES: usize = 32_768;
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

/// A validated stored history.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Records in stored order.
    pub records: Vec<Map<String, Value>>,
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

/// Validates stored bytes of session `id`. `Err(())` means malformed (`session_invalid`).
#[allow(clippy::result_unit_err)]
pub fn parse(bytes: &[u8], id: &SessionId) -> Result<Parsed, ()> {
    let mut p = Parsed::default();
    let (complete, torn) = match memchr::memrchr(b'\n', bytes) {
        Some(i) => (&bytes[..=i], i + 1 < bytes.len()),
        None => (&bytes[..0], !bytes.is_empty()),
    };
    p.torn_tail = torn;
    for line in complete.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let (v, dups) = parse_strict(line).map_err(|_| ())?;
        if !dups.top.is_empty() || dups.nested {
            return Err(());
        }
        let Value::Object(m) = v else { return Err(()) };
        if s(&m, "session_id") != Some(id.as_str()) {
            return Err(());
        }
        let ts = s(&m, "ts").and_then(parse_rfc3339).ok_or(())?;
        check_record(&m).ok_or(())?;
        p.updated_ms = Some(p.updated_ms.map_or(ts, |u| u.max(ts)));
        if let Some(cwd) = s(&m, "cwd").filter(|c| !c.is_empty()) {
            p.cwds.push(cwd.to_owned());
        }
        match s(&m, "type") {
            Some("title") => p.title = s(&m, "title").map(str::to_owned),
            Some("compaction") => {
                if let Some(t) = s(&m, "title") {
                    p.title = Some(t.to_owned());
                }
            }
            Some("session_preferences") => {
                p.preferences = Some(Preferences {
                    provider: s(&m, "provider").unwrap_or_default().to_owned(),
                    model: s(&m, "model").unwrap_or_default().to_owned(),
                    effort: s(&m, "effort").unwrap_or("default").to_owned(),
                });
            }
            _ => {}
        }
        p.records.push(m);
    }
    // An empty line inside the file is malformed; `split` yields one after the final LF only.
    if complete.windows(2).any(|w| w == b"\n\n") || complete.first() == Some(&b'\n') {
        return Err(());
    }
    Ok(p)
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

struct Logical {
    kind: &'static str,
    text: String,
    partial: bool,
}

/// Why a projection could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectionError {
    /// Over 8 MiB serialized or 10,000 parts.
    TooLarge,
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

/// Builds the projection of validated records (`protocol` "Owned sessions and chat history").
pub fn project(p: &Parsed) -> Result<Projection, ProjectionError> {
    let mut finished: HashSet<&str> = HashSet::new();
    let mut reconciled: HashMap<&str, &str> = HashMap::new();
    let mut has_message: HashSet<&str> = HashSet::new();
    let mut chunks: HashMap<&str, String> = HashMap::new();
    let mut runs: Vec<&str> = Vec::new();
    for r in &p.records {
        match s(r, "type") {
            Some("run_finished") => {
                finished.insert(s(r, "run_id").unwrap_or_default());
            }
            Some("assistant_message") => {
                let id = s(r, "message_id").unwrap_or_default();
                has_message.insert(id);
                if let Some(t) = s(r, "text") {
                    reconciled.insert(id, t);
                }
            }
            Some("assistant_chunk") => {
                chunks
                    .entry(s(r, "message_id").unwrap_or_default())
                    .or_default()
                    .push_str(s(r, "text").unwrap_or_default());
            }
            Some("user_input") => runs.push(s(r, "run_id").unwrap_or_default()),
            _ => {}
        }
    }
    let mut out: Vec<Logical> = Vec::new();
    let mut assistant_done: HashSet<&str> = HashSet::new();
    let mut summaries: HashMap<(&str, &str), usize> = HashMap::new();
    let mut activities: HashMap<&str, usize> = HashMap::new();
    for r in &p.records {
        let run = s(r, "run_id").unwrap_or_default();
        match s(r, "type") {
            Some("user_input") => {
                out.push(Logical {
                    kind: "user",
                    text: s(r, "text").unwrap_or_default().to_owned(),
                    partial: false,
                });
            }
            Some("assistant_chunk" | "assistant_message") => {
                let id = s(r, "message_id").unwrap_or_default();
                if !assistant_done.insert(id) {
                    continue;
                }
                let (text, partial) = match reconciled.get(id) {
                    Some(t) => ((*t).to_owned(), false),
                    None => (
                        chunks.get(id).cloned().unwrap_or_default(),
                        !has_message.contains(id),
                    ),
                };
                out.push(Logical {
                    kind: "assistant",
                    text,
                    partial,
                });
            }
            Some("reasoning_summary") => {
                if r.get("provider_summary") != Some(&Value::Bool(true)) {
                    continue;
                }
                let text = s(r, "text").unwrap_or_default().to_owned();
                match s(r, "item_id") {
                    Some(item) => match summaries.get(&(run, item)) {
                        Some(&i) => out[i].text = text,
                        None => {
                            summaries.insert((run, item), out.len());
                            out.push(Logical {
                                kind: "reasoning_summary",
                                text,
                                partial: false,
                            });
                        }
                    },
                    None => out.push(Logical {
                        kind: "reasoning_summary",
                        text,
                        partial: false,
                    }),
                }
            }
            Some("activity") => {
                let state = s(r, "state").unwrap_or_default();
                let mut text = format!("{}: {}", s(r, "name").unwrap_or_default(), state);
                if let Some(sum) = s(r, "summary").filter(|x| !x.is_empty()) {
                    text.push_str(" — ");
                    text.push_str(sum);
                }
                let partial = state == "started";
                match activities.get(s(r, "activity_id").unwrap_or_default()) {
                    Some(&i) => {
                        out[i] = Logical {
                            kind: "activity",
                            text,
                            partial,
                        }
                    }
                    None => {
                        activities.insert(s(r, "activity_id").unwrap_or_default(), out.len());
                        out.push(Logical {
                            kind: "activity",
                            text,
                            partial,
                        });
                    }
                }
            }
            Some("compaction") => {
                let text = s(r, "summary").unwrap_or("history compacted").to_owned();
                out.push(Logical {
                    kind: "compaction",
                    text,
                    partial: false,
                });
            }
            _ => {}
        }
    }
    let mut interrupted = runs.iter().any(|r| !finished.contains(r));
    if p.torn_tail {
        interrupted = true;
    }
    if interrupted {
        out.push(Logical {
            kind: "diagnostic",
            text: "A turn was interrupted before it finished durably; its reply may be incomplete."
                .into(),
            partial: true,
        });
    }
    let mut entries = Vec::new();
    let mut bytes = 0usize;
    for (n, l) in out.iter().enumerate() {
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
                return Err(ProjectionError::TooLarge);
            }
        }
    }
    Ok(Projection {
        entries,
        complete: !interrupted,
    })
}

/// One page from entry `start`: the entries that fit 32,768 serialized result bytes and 100
/// entries, given the serialized size of the result without entries.
#[must_use]
pub fn page_end(entries: &[String], start: usize, limit: usize, base_bytes: usize) -> usize {
    let mut size = base_bytes;
    let mut end = start;
    while end < entries.len() && end - start < limit {
        let add = entries[end].len() + usize::from(end > start);
        if size + add > PAGE_BYTES {
            break;
        }
        size += add;
        end += 1;
    }
    end
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
        let p = parse(&recs, &id()).unwrap();
        let pr = project(&p).unwrap();
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
        let p = parse(&recs, &id()).unwrap();
        assert!(p.torn_tail);
        let pr = project(&p).unwrap();
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
        assert!(parse(&lines(std::slice::from_ref(&ok)), &id()).is_ok());
        for bad in [
            json!({"type":"title","session_id":"other","ts":TS,"title":"t"}),
            json!({"type":"diagnostic","session_id":"s1","ts":TS,"code":"x","summary":"y"}),
            json!({"type":"nope","session_id":"s1","ts":TS}),
            json!({"type":"title","session_id":"s1","ts":"yesterday","title":"t"}),
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r"}),
            json!([1]),
        ] {
            assert!(
                parse(&lines(&[ok.clone(), bad.clone()]), &id()).is_err(),
                "{bad}"
            );
        }
        assert!(parse(b"{\"type\":\"title\"}\n\n", &id()).is_err());
        assert!(parse(b"not json\n", &id()).is_err());
        assert!(parse(b"", &id()).unwrap().records.is_empty());
    }
}
