//! Owned sessions, chat history and read-only discovery over real pipes: `session.create`,
//! `session.open`, `history.page`, `session.list`, `session.discover` and `operation.cancel`
//! against histories written directly into `MC_HOME/sessions` (`local-agent-protocol.md`
//! "Owned sessions and chat history" and "Read-only session discovery", `backend.md`
//! "Storage" and "History records", `decisions.md` 11–14, 21–23, 26, `extensions.md`).
//!
//! Every error code of those sections comes out of at least one test here, except
//! `content_limit`: no stored history can produce it yet (every text is chunked), so it is not
//! covered.

mod create_open;
mod discover;
mod full_disk;
mod history_page;
mod list;
mod long;
mod ownership;
mod soak;
mod stored_histories;

use crate::common::*;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const BASE: [&str; 2] = ["status", "shutdown"];
const HISTORY_PAGE_KEYS: [&str; 5] = [
    "session_id",
    "revision",
    "entries",
    "next_cursor",
    "complete",
];
const ENTRY_KEYS: [&str; 6] = ["message_id", "kind", "text", "partial", "part", "last_part"];
const OPEN_KEYS: [&str; 4] = ["session_id", "durable", "revision", "notices"];
const LIST_KEYS: [&str; 5] = ["revision", "sessions", "next_cursor", "complete", "notices"];
const LIST_ENTRY_KEYS: [&str; 5] = [
    "session_id",
    "title",
    "updated_at",
    "eligibility",
    "notices",
];
const DISCOVER_KEYS: [&str; 5] = [
    "sessions",
    "next_cursor",
    "complete",
    "provisional",
    "notices",
];

// ---------------------------------------------------------------------------------------------
// Session requests of a [`Client`].

impl Client {
    /// `session.open` that must succeed; checks the result shape and returns it.
    #[track_caller]
    fn open(&mut self, id: &str) -> Value {
        let r = self.ok("session.open", &json!({ "session_id": id }));
        assert_open_result(&r, id);
        r
    }

    /// The revision of a successful `session.open`.
    #[track_caller]
    fn open_rev(&mut self, id: &str) -> String {
        self.open(id)["revision"].as_str().unwrap().to_owned()
    }

    /// One `history.page`.
    #[track_caller]
    fn page(&mut self, id: &str, rev: &str, cursor: Option<&str>) -> Value {
        let r = self.ok(
            "history.page",
            &json!({ "session_id": id, "revision": rev, "cursor": cursor }),
        );
        check_history_page(&r, id, rev);
        r
    }

    /// Every entry of a history projection, paging from a null cursor; checks each page.
    #[track_caller]
    fn page_all(&mut self, id: &str, rev: &str) -> (Vec<Value>, usize) {
        let (entries, pages, _) = self.page_all_complete(id, rev);
        (entries, pages)
    }

    /// [`Client::page_all`] plus the last page's `complete`.
    #[track_caller]
    fn page_all_complete(&mut self, id: &str, rev: &str) -> (Vec<Value>, usize, bool) {
        let mut entries = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let r = self.page(id, rev, cursor.as_deref());
            pages += 1;
            entries.extend(r["entries"].as_array().unwrap().iter().cloned());
            match r["next_cursor"].as_str() {
                Some(c) => {
                    assert_eq!(r["complete"], false, "complete only on the last page: {r}");
                    cursor = Some(c.to_owned());
                }
                None => {
                    check_messages(&entries);
                    return (entries, pages, r["complete"] == true);
                }
            }
            assert!(pages < 1000, "cursor chain does not end");
        }
    }

    /// A fresh `session.list` with `limit`.
    #[track_caller]
    fn list(&mut self, limit: u64) -> Value {
        let r = self.ok(
            "session.list",
            &json!({ "revision": null, "cursor": null, "limit": limit }),
        );
        check_list(&r);
        r
    }

    /// A continuation of `session.list`.
    #[track_caller]
    fn list_more(&mut self, rev: &str, cursor: &str, limit: u64) -> Value {
        let r = self.ok(
            "session.list",
            &json!({ "revision": rev, "cursor": cursor, "limit": limit }),
        );
        check_list(&r);
        assert_eq!(r["revision"], rev, "continuations keep the revision: {r}");
        r
    }

    /// Every entry of a fresh listing, paging with `limit`.
    #[track_caller]
    fn list_all(&mut self, limit: u64) -> (Vec<Value>, Value) {
        let first = self.list(limit);
        let rev = first["revision"].as_str().unwrap().to_owned();
        let mut entries: Vec<Value> = first["sessions"].as_array().unwrap().clone();
        let mut r = first.clone();
        let mut pages = 1;
        while let Some(c) = r["next_cursor"].as_str().map(str::to_owned) {
            assert_eq!(r["complete"], false, "{r}");
            r = self.list_more(&rev, &c, limit);
            entries.extend(r["sessions"].as_array().unwrap().iter().cloned());
            pages += 1;
            assert!(pages < 100, "cursor chain does not end");
        }
        assert_eq!(r["complete"], true, "last page is complete: {r}");
        (entries, first)
    }
}

// ---------------------------------------------------------------------------------------------
// Shape checks.

/// Whether `s` matches the session-ID grammar `[A-Za-z0-9_-]{1,64}`.
fn is_session_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `s` matches the opaque-ID grammar `[A-Za-z0-9._-]{1,64}`.
fn is_opaque_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[track_caller]
fn assert_open_result(r: &Value, id: &str) {
    assert_keys(r, &OPEN_KEYS);
    assert_eq!(r["session_id"], id, "{r}");
    assert!(r["durable"].is_boolean(), "{r}");
    assert!(
        r["revision"].as_str().is_some_and(is_opaque_id),
        "revision follows the ID grammar: {r}"
    );
    assert!(
        r["notices"]
            .as_array()
            .is_some_and(|n| n.iter().all(Value::is_string)),
        "{r}"
    );
}

#[track_caller]
fn check_history_page(r: &Value, id: &str, rev: &str) {
    assert_keys(r, &HISTORY_PAGE_KEYS);
    assert_eq!(r["session_id"], id, "{r}");
    assert_eq!(r["revision"], rev, "{r}");
    let bytes = serde_json::to_string(r).unwrap().len();
    assert!(
        bytes <= 32_768,
        "history page of {bytes} serialized bytes over 32,768"
    );
    let entries = r["entries"].as_array().expect("entries array");
    assert!(
        entries.len() <= 100,
        "{} entries in one page",
        entries.len()
    );
    assert!(r["complete"].is_boolean(), "{r}");
    match &r["next_cursor"] {
        Value::Null => {}
        Value::String(c) => {
            assert!(
                is_opaque_id(c),
                "cursor follows the 64-byte ID grammar: {c}"
            );
            assert_eq!(r["complete"], false, "complete only on the last page");
        }
        other => panic!("next_cursor must be a string or null: {other}"),
    }
    for e in entries {
        assert_keys(e, &ENTRY_KEYS);
        assert!(
            e["message_id"].as_str().is_some_and(is_opaque_id),
            "message IDs follow the ID grammar: {e}"
        );
        assert!(
            matches!(
                e["kind"].as_str(),
                Some(
                    "user"
                        | "assistant"
                        | "reasoning_summary"
                        | "activity"
                        | "compaction"
                        | "diagnostic"
                )
            ),
            "{e}"
        );
        let text = e["text"].as_str().expect("text string");
        assert!(
            text.len() <= 16_384,
            "text part of {} UTF-8 bytes",
            text.len()
        );
        assert!(
            e["partial"].is_boolean() && e["last_part"].is_boolean(),
            "{e}"
        );
        assert!(e["part"].is_u64(), "{e}");
    }
}

/// Parts of one message are contiguous, numbered from 0, and only the last has `last_part`.
#[track_caller]
fn check_messages(entries: &[Value]) {
    let mut seen = BTreeSet::new();
    let mut i = 0;
    while i < entries.len() {
        let id = entries[i]["message_id"].as_str().unwrap();
        assert!(
            seen.insert(id.to_owned()),
            "parts of message {id} are not contiguous"
        );
        let mut part = 0;
        loop {
            let e = &entries[i];
            assert_eq!(e["message_id"], id, "part {part} of {id} missing: {e}");
            assert_eq!(e["part"], part, "parts start at 0 and count up: {e}");
            assert_eq!(e["kind"], entries[i - part as usize]["kind"], "{e}");
            assert_eq!(e["partial"], entries[i - part as usize]["partial"], "{e}");
            i += 1;
            if e["last_part"] == true {
                break;
            }
            assert!(i < entries.len(), "message {id} has no last part");
            part += 1;
        }
    }
}

/// Logical messages: (kind, concatenated text, partial).
fn messages(entries: &[Value]) -> Vec<(String, String, bool)> {
    let mut out: Vec<(String, String, bool)> = Vec::new();
    for e in entries {
        let text = e["text"].as_str().unwrap();
        if e["part"] == 0 {
            out.push((
                e["kind"].as_str().unwrap().to_owned(),
                text.to_owned(),
                e["partial"] == true,
            ));
        } else {
            out.last_mut().unwrap().1.push_str(text);
        }
    }
    out
}

#[track_caller]
fn check_list(r: &Value) {
    assert_keys(r, &LIST_KEYS);
    assert!(r["revision"].as_str().is_some_and(is_opaque_id), "{r}");
    assert!(serde_json::to_string(r).unwrap().len() <= 32_768, "{r}");
    assert!(r["complete"].is_boolean(), "{r}");
    match &r["next_cursor"] {
        Value::Null => assert_eq!(r["complete"], true, "{r}"),
        Value::String(c) => {
            assert!(is_opaque_id(c), "{c}");
            assert_eq!(r["complete"], false, "{r}");
        }
        other => panic!("next_cursor: {other}"),
    }
    assert!(r["notices"].is_array(), "{r}");
    let sessions = r["sessions"].as_array().expect("sessions array");
    assert!(sessions.len() <= 100, "{r}");
    for e in sessions {
        check_list_entry(e);
    }
    let ids: Vec<&str> = sessions
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ascending ASCII order: {ids:?}"
    );
}

#[track_caller]
fn check_list_entry(e: &Value) {
    assert_keys(e, &LIST_ENTRY_KEYS);
    assert!(e["session_id"].as_str().is_some_and(is_session_id), "{e}");
    assert!(
        e["title"].is_null()
            || e["title"]
                .as_str()
                .is_some_and(|t| t.chars().count() <= 50 && t.len() <= 256),
        "{e}"
    );
    assert!(
        e["updated_at"].is_null() || e["updated_at"].as_str().is_some_and(is_utc_rfc3339),
        "{e}"
    );
    assert!(
        matches!(
            e["eligibility"].as_str(),
            Some("available" | "cwd_unverified" | "busy")
        ),
        "{e}"
    );
    assert!(e["notices"].is_array(), "{e}");
}

/// `YYYY-MM-DDTHH:MM:SS[.f+]Z`.
fn is_utc_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[b.len() - 1] == b'Z'
        && (b.len() == 20 || (b[19] == b'.' && b.len() > 21 && digits(20..b.len() - 1)))
}

/// Asserts `s` is the UTC instant `base` (`YYYY-MM-DDTHH:MM:SS`) with an optional zero
/// fraction.
#[track_caller]
fn assert_instant(s: &Value, base: &str) {
    let s = s.as_str().unwrap_or_else(|| panic!("not a string: {s}"));
    assert!(is_utc_rfc3339(s), "not UTC RFC 3339: {s}");
    let body = &s[..s.len() - 1];
    let (whole, frac) = body.split_once('.').unwrap_or((body, "0"));
    assert_eq!(whole, base, "updated_at {s}");
    assert!(frac.bytes().all(|b| b == b'0'), "updated_at {s}");
}

fn by_id(entries: &[Value]) -> HashMap<String, Value> {
    entries
        .iter()
        .map(|e| (e["session_id"].as_str().unwrap().to_owned(), e.clone()))
        .collect()
}

fn ids_of(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| e["session_id"].as_str().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Files under test.

/// A file's bytes, access and modification times.
struct Saved {
    path: PathBuf,
    bytes: Vec<u8>,
    accessed: SystemTime,
    modified: SystemTime,
}

fn save(path: &Path) -> Saved {
    let m = fs::metadata(path).unwrap();
    Saved {
        path: path.to_owned(),
        bytes: fs::read(path).unwrap(),
        accessed: m.accessed().unwrap(),
        modified: m.modified().unwrap(),
    }
}

/// Appends `line` (plus LF) in place, as another process would.
fn append_line(path: &Path, line: &Value) {
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// Puts the saved bytes and times back into the same inode.
fn restore(s: &Saved) {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&s.path)
        .unwrap();
    f.write_all(&s.bytes).unwrap();
    f.set_times(
        fs::FileTimes::new()
            .set_accessed(s.accessed)
            .set_modified(s.modified),
    )
    .unwrap();
    drop(f);
    let now = fs::metadata(&s.path).unwrap();
    assert_eq!(now.modified().unwrap(), s.modified, "mtime restored");
    assert_eq!(fs::read(&s.path).unwrap(), s.bytes);
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo")
        .success();
    assert!(ok, "mkfifo failed");
}

/// A 100 KB (or more) assistant text with multibyte characters and JSON escapes.
fn long_multibyte_text() -> String {
    let unit = "Grüße aus Köln — 漢字かな交じり 🦀🚀 \"quoted\" back\\slash\tand tab\n";
    let mut t = String::new();
    let mut n = 0;
    while t.len() < 100 * 1024 {
        t.push_str(&format!("line {n}: "));
        t.push_str(unit);
        n += 1;
    }
    t
}
