//! Owned sessions, chat history and read-only discovery over real pipes: `session.create`,
//! `session.open`, `history.page`, `session.list`, `session.discover` and `operation.cancel`
//! against histories written directly into `MC_HOME/sessions` (`local-agent-protocol.md`
//! "Owned sessions and chat history" and "Read-only session discovery", `backend.md`
//! "Storage" and "History records", `decisions.md` 11–14, 21–23, 26, `extensions.md`).
//!
//! Every error code of those sections comes out of at least one test here, except
//! `content_limit`: no stored history can produce it yet (every text is chunked), so it is not
//! covered.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

const TS: &str = "2026-11-30T12:00:00Z";
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
// A client with fresh request IDs.

/// A ready child plus a request-ID counter (IDs are never reused within a child).
struct Client {
    s: Server,
    n: u64,
}

impl Client {
    /// Spawns a child in `env` and initializes it requiring `caps`; asserts readiness.
    #[track_caller]
    fn start(env: &Env, caps: &[&str]) -> Self {
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(caps));
        let r = result(&f);
        assert_ready_status(&r["status"], "scripted", "echo");
        Self { s, n: 0 }
    }

    /// The `initialize` result of a fresh child requiring `caps`.
    #[track_caller]
    fn start_with_result(env: &Env, caps: &[&str]) -> (Self, Value) {
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(caps));
        let r = result(&f).clone();
        assert_ready_status(&r["status"], "scripted", "echo");
        (Self { s, n: 0 }, r)
    }

    fn next_id(&mut self) -> String {
        self.n += 1;
        format!("q{}", self.n)
    }

    /// Sends a request without waiting; returns its ID.
    fn send(&mut self, method: &str, params: &Value) -> String {
        let id = self.next_id();
        self.s.request(&id, method, params);
        id
    }

    /// Sends one request and returns its response frame (which must be the next frame).
    #[track_caller]
    fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.next_id();
        self.s.call(&id, method, params)
    }

    /// A successful result.
    #[track_caller]
    fn ok(&mut self, method: &str, params: &Value) -> Value {
        let f = self.call(method, params);
        result(&f).clone()
    }

    /// Asserts the request fails with `code`.
    #[track_caller]
    fn fails(&mut self, method: &str, params: &Value, code: &str) {
        let id = self.next_id();
        let f = self.s.call(&id, method, params);
        assert_error(&f, Some(&id), code);
    }

    /// The current `status` result.
    #[track_caller]
    fn status(&mut self) -> Value {
        self.ok("status", &json!({}))
    }

    /// `status.session_id`.
    #[track_caller]
    fn attached(&mut self) -> Value {
        self.status()["session_id"].clone()
    }

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

    /// Retries `method` while it answers `busy` (the worker slot stays busy until a
    /// cancelled worker actually stops), for at most [`STEP`].
    #[track_caller]
    fn call_when_free(&mut self, method: &str, params: &Value) -> Value {
        let deadline = Instant::now() + STEP;
        loop {
            let f = self.call(method, params);
            if f.get("error").is_some() && error_code(&f) == "busy" && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
                continue;
            }
            return f;
        }
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
// Writing histories.

/// `MC_HOME/sessions`, created (0700) if missing.
fn sessions_dir(env: &Env) -> PathBuf {
    let dir = env.home().join("sessions");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("create sessions folder");
    dir
}

/// The canonical cwd of children spawned in `env`.
fn canonical_cwd(env: &Env) -> String {
    fs::canonicalize(&env.cwd)
        .expect("canonical cwd")
        .to_str()
        .expect("UTF-8 cwd")
        .to_owned()
}

/// A record of type `ty` for session `id` with `extra` fields.
fn rec(ty: &str, id: &str, extra: &Value) -> Value {
    let mut m = json!({ "type": ty, "session_id": id, "ts": TS });
    for (k, v) in extra.as_object().expect("extra fields object") {
        m[k] = v.clone();
    }
    m
}

/// `session_meta` with the canonical cwd of `env`.
fn meta(env: &Env, id: &str) -> Value {
    rec("session_meta", id, &json!({ "cwd": canonical_cwd(env) }))
}

/// One completed run: `user_input`, optional `assistant_message`, `run_finished`.
fn run(id: &str, run_id: &str, prompt: &str, reply: Option<&str>) -> Vec<Value> {
    let mut v = vec![rec(
        "user_input",
        id,
        &json!({ "run_id": run_id, "text": prompt }),
    )];
    if let Some(t) = reply {
        v.push(rec(
            "assistant_message",
            id,
            &json!({ "run_id": run_id, "message_id": format!("a-{run_id}"), "text": t }),
        ));
    }
    v.push(rec(
        "run_finished",
        id,
        &json!({ "run_id": run_id, "outcome": "completed" }),
    ));
    v
}

fn jsonl(records: &[Value]) -> Vec<u8> {
    let mut b = Vec::new();
    for r in records {
        serde_json::to_writer(&mut b, r).unwrap();
        b.push(b'\n');
    }
    b
}

/// Writes `sessions/<id>.jsonl` with `records`; returns its path.
fn write_history(env: &Env, id: &str, records: &[Value]) -> PathBuf {
    write_raw(env, &format!("{id}.jsonl"), &jsonl(records))
}

/// Writes `sessions/<name>` with raw bytes; returns its path.
fn write_raw(env: &Env, name: &str, bytes: &[u8]) -> PathBuf {
    let p = sessions_dir(env).join(name);
    fs::write(&p, bytes).expect("write history");
    p
}

/// A minimal valid history of `id` for `env`'s cwd.
fn tiny(env: &Env, id: &str) -> PathBuf {
    write_history(env, id, &[meta(env, id)])
}

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

// ---------------------------------------------------------------------------------------------
// session.create

#[test]
fn create_is_lazy_and_reopens_only_in_the_same_child() {
    let env = Env::new();
    let mut c = Client::start(&env, &BASE);
    let r = c.ok("session.create", &json!({}));
    assert_keys(&r, &OPEN_KEYS);
    let id = r["session_id"].as_str().expect("session_id").to_owned();
    assert!(is_session_id(&id), "session ID grammar: {id}");
    assert_eq!(r["durable"], false, "{r}");
    assert_eq!(r["notices"], json!([]), "{r}");
    let rev = r["revision"].as_str().unwrap().to_owned();
    assert!(is_opaque_id(&rev), "{r}");
    // No placeholder history, no lease: nothing in sessions/ at all.
    let names: Vec<_> = fs::read_dir(env.home().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "session.create wrote {names:?}");
    assert_eq!(c.attached(), id.as_str());

    // decisions.md 14: the projection of a lazy session is empty and complete.
    let p = c.page(&id, &rev, None);
    assert_eq!(p["entries"], json!([]));
    assert_eq!(p["complete"], true);
    assert!(p["next_cursor"].is_null());
    // The cursor may be omitted.
    let p = c.ok(
        "history.page",
        &json!({ "session_id": id, "revision": rev }),
    );
    check_history_page(&p, &id, &rev);
    assert_eq!(p["entries"], json!([]));

    // Same-child reopen of the lazy handle.
    let r2 = c.ok("session.open", &json!({ "session_id": id }));
    assert_keys(&r2, &OPEN_KEYS);
    assert_eq!(r2["session_id"], id.as_str());
    assert_eq!(r2["durable"], false, "{r2}");
    assert_eq!(r2["notices"], json!([]), "{r2}");
    let rev2 = r2["revision"].as_str().unwrap().to_owned();
    assert!(is_opaque_id(&rev2));
    let p = c.page(&id, &rev2, None);
    assert_eq!(
        (p["entries"].clone(), p["complete"].clone()),
        (json!([]), json!(true))
    );
    assert_eq!(c.attached(), id.as_str());

    // Another create replaces the attachment with a different ID.
    let r3 = c.ok("session.create", &json!({}));
    let id3 = r3["session_id"].as_str().unwrap().to_owned();
    assert_ne!(id3, id, "fresh session IDs");
    assert_eq!(c.attached(), id3.as_str());
    assert!(fs::read_dir(env.home().join("sessions"))
        .unwrap()
        .next()
        .is_none());
    c.s.shutdown_ok("bye");

    // A new child cannot open a lazy ID that never became durable.
    let mut c2 = Client::start(&env, &BASE);
    c2.fails(
        "session.open",
        &json!({ "session_id": id }),
        "session_missing",
    );
    c2.fails(
        "session.open",
        &json!({ "session_id": id3 }),
        "session_missing",
    );
    assert!(c2.attached().is_null());
    c2.s.shutdown_ok("bye");
}

#[test]
fn session_operations_need_initialization() {
    let env = Env::new();
    let mut s = env.spawn();
    for (i, (m, p)) in [
        ("session.create", json!({})),
        ("session.open", json!({ "session_id": "abc" })),
        ("session.list", json!({})),
        (
            "history.page",
            json!({ "session_id": "abc", "revision": "r", "cursor": null }),
        ),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("pre{i}");
        let f = s.call(&id, m, p);
        assert_error(&f, Some(&id), "not_initialized");
    }
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------------
// session.open and history.page

#[test]
fn open_pages_through_a_long_history() {
    let env = Env::new();
    let id = "long-history_1";
    let big = long_multibyte_text();
    let mut records = vec![meta(&env, id)];
    let mut expected: Vec<(String, String)> = Vec::new();
    for i in 0..250 {
        let prompt = format!("question {i}: ünïcödé ✓ «{i}»");
        let reply = if i == 125 {
            big.clone()
        } else {
            format!("answer {i} ✓")
        };
        records.extend(run(id, &format!("r{i}"), &prompt, Some(&reply)));
        expected.push(("user".into(), prompt));
        expected.push(("assistant".into(), reply));
    }
    records.push(rec("title", id, &json!({ "title": "A long history" })));
    write_history(&env, id, &records);

    let mut c = Client::start(&env, &BASE);
    let r = c.open(id);
    assert_eq!(r["durable"], true, "{r}");
    assert_eq!(r["notices"], json!([]), "{r}");
    assert_eq!(c.attached(), id);
    let rev = r["revision"].as_str().unwrap().to_owned();

    let (entries, pages, complete) = c.page_all_complete(id, &rev);
    assert!(
        complete,
        "the last page of a complete projection is complete"
    );
    assert!(
        pages >= 6,
        "510+ entries need at least 6 pages, got {pages}"
    );
    let got: Vec<(String, String)> = messages(&entries)
        .into_iter()
        .map(|(k, t, partial)| {
            assert!(!partial, "completed runs are not partial");
            (k, t)
        })
        .collect();
    assert_eq!(got.len(), expected.len(), "one logical message per record");
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g.0, e.0, "kind of message {i}");
        assert_eq!(
            g.1, e.1,
            "text of message {i} (parts concatenate to the stored text)"
        );
    }
    // The 100 KB reply needs several parts; each fits the chunk bound.
    let big_parts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "assistant" && e["text"].as_str().unwrap().contains("Köln"))
        .collect();
    assert!(big_parts.len() >= 7, "{} parts", big_parts.len());
    assert_eq!(big_parts[0]["part"], 0);
    assert_eq!(big_parts.last().unwrap()["last_part"], true);
    assert!(big_parts[..big_parts.len() - 1]
        .iter()
        .all(|e| e["last_part"] == false));

    // The same cursor gives the same page again within one revision.
    let first = c.page(id, &rev, None);
    let cur = first["next_cursor"].as_str().unwrap().to_owned();
    let a = c.page(id, &rev, Some(&cur));
    let b = c.page(id, &rev, Some(&cur));
    assert_eq!(a, b, "pages of one revision are immutable");
    c.s.shutdown_ok("bye");
}

#[test]
fn history_revisions_go_stale_and_stay_stale() {
    let env = Env::new();
    let id = "sticky";
    let mut records = vec![meta(&env, id)];
    for i in 0..150 {
        records.extend(run(id, &format!("r{i}"), &format!("prompt {i}"), None));
    }
    let path = write_history(&env, id, &records);
    let mut c = Client::start(&env, &BASE);
    let rev1 = c.open_rev(id);
    let p1 = c.page(id, &rev1, None);
    let cur1 = p1["next_cursor"]
        .as_str()
        .expect("150 entries take two pages")
        .to_owned();
    assert_eq!(p1["complete"], false);

    // A revision that was never issued.
    let params = |rev: &str, cursor: Option<&str>| json!({ "session_id": id, "revision": rev, "cursor": cursor });
    c.fails(
        "history.page",
        &params("not-a-revision", None),
        "stale_revision",
    );
    // A well-formed cursor that was never issued.
    c.fails(
        "history.page",
        &params(&rev1, Some("bogus-cursor")),
        "stale_revision",
    );

    // Reopen: a new revision; the old revision and its cursors are stale.
    let rev2 = c.open_rev(id);
    assert_ne!(rev1, rev2, "reopen gives a new revision");
    c.fails("history.page", &params(&rev1, None), "stale_revision");
    c.fails(
        "history.page",
        &params(&rev2, Some(&cur1)),
        "stale_revision",
    );
    c.fails(
        "history.page",
        &params(&rev1, Some(&cur1)),
        "stale_revision",
    );
    let p2 = c.page(id, &rev2, None);
    let cur2 = p2["next_cursor"].as_str().unwrap().to_owned();
    let last = c.page(id, &rev2, Some(&cur2));
    assert_eq!(last["complete"], true);
    assert!(last["next_cursor"].is_null());

    // Grammar faults are invalid_params before any staleness check (decisions.md 26).
    c.fails(
        "history.page",
        &params("bad revision", None),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &params(&rev2, Some("bad/cursor")),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &params(&"r".repeat(65), None),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": "a.b", "revision": rev2, "cursor": null }),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": id, "revision": rev2, "cursor": null, "extra": 1 }),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": id, "cursor": null }),
        "invalid_params",
    );
    // ...and they did not invalidate the snapshot.
    c.page(id, &rev2, Some(&cur2));

    // External modification: another writer appends a line.
    let saved = save(&path);
    append_line(
        &path,
        &rec("title", id, &json!({ "title": "changed behind our back" })),
    );
    c.fails("history.page", &params(&rev2, None), "stale_revision");
    c.fails(
        "history.page",
        &params(&rev2, Some(&cur2)),
        "stale_revision",
    );
    // Sticky: restoring the exact bytes and times does not revive the snapshot.
    restore(&saved);
    c.fails("history.page", &params(&rev2, None), "stale_revision");
    c.fails(
        "history.page",
        &params(&rev2, Some(&cur2)),
        "stale_revision",
    );
    assert_eq!(c.attached(), id, "staleness keeps the attachment");

    // A fresh open gives a revision that works.
    let rev3 = c.open_rev(id);
    assert!(rev3 != rev1 && rev3 != rev2);
    let (entries, _) = c.page_all(id, &rev3);
    assert_eq!(entries.len(), 150);

    // A modification between open and the first page is detected too.
    let rev4 = c.open_rev(id);
    append_line(
        &path,
        &rec("title", id, &json!({ "title": "changed again" })),
    );
    c.fails("history.page", &params(&rev4, None), "stale_revision");
    let rev5 = c.open_rev(id);
    c.page_all(id, &rev5);
    c.s.shutdown_ok("bye");
}

#[test]
fn history_page_checks_the_attachment() {
    let env = Env::new();
    tiny(&env, "alpha");
    tiny(&env, "beta");
    let mut c = Client::start(&env, &BASE);
    // No attachment yet.
    c.fails(
        "history.page",
        &json!({ "session_id": "alpha", "revision": "r1", "cursor": null }),
        "session_missing",
    );
    // Exact ID only: no such history.
    c.fails(
        "session.open",
        &json!({ "session_id": "gamma" }),
        "session_missing",
    );
    assert!(c.attached().is_null());
    let rev = c.open_rev("alpha");
    // A different session ID than the attached one (even an existing history).
    c.fails(
        "history.page",
        &json!({ "session_id": "beta", "revision": rev, "cursor": null }),
        "stale_session",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": "nosuch", "revision": rev, "cursor": null }),
        "stale_session",
    );
    let p = c.page("alpha", &rev, None);
    assert_eq!(
        p["entries"],
        json!([]),
        "decisions.md 22: meta only is empty"
    );
    assert_eq!(p["complete"], true);

    // Params of session.open are strict.
    for bad in [
        json!({}),
        json!({ "session_id": "" }),
        json!({ "session_id": "a.b" }),
        json!({ "session_id": "x".repeat(65) }),
        json!({ "session_id": 5 }),
        json!({ "session_id": "alpha", "extra": true }),
        json!({ "session_id": "../alpha" }),
    ] {
        c.fails("session.open", &bad, "invalid_params");
    }
    c.fails("session.create", &json!({ "x": 1 }), "invalid_params");
    assert_eq!(c.attached(), "alpha");
    c.page("alpha", &rev, None);
    c.s.shutdown_ok("bye");
}

#[test]
fn failed_opens_leave_the_attachment_intact() {
    let env = Env::new();
    let mut a = vec![meta(&env, "keep")];
    a.extend(run("keep", "r1", "hello", Some("world")));
    write_history(&env, "keep", &a);
    write_raw(&env, "broken.jsonl", b"{not json\n");
    write_history(
        &env,
        "elsewhere",
        &[rec("session_meta", "elsewhere", &json!({ "cwd": "/" }))],
    );
    let mut c = Client::start(&env, &BASE);
    let rev = c.open_rev("keep");
    for (target, code) in [
        ("missing", "session_missing"),
        ("broken", "session_invalid"),
        ("elsewhere", "cwd_mismatch"),
    ] {
        c.fails("session.open", &json!({ "session_id": target }), code);
        assert_eq!(c.attached(), "keep", "after {code}");
        let (entries, _) = c.page_all("keep", &rev);
        let m = messages(&entries);
        assert_eq!(
            m,
            vec![
                ("user".into(), "hello".into(), false),
                ("assistant".into(), "world".into(), false)
            ],
            "after {code}"
        );
    }
    // A lazy attachment survives a failed open as well.
    let lazy = c.ok("session.create", &json!({}));
    let lazy_id = lazy["session_id"].as_str().unwrap().to_owned();
    c.fails(
        "session.open",
        &json!({ "session_id": "missing" }),
        "session_missing",
    );
    assert_eq!(c.attached(), lazy_id.as_str());
    c.page(&lazy_id, lazy["revision"].as_str().unwrap(), None);
    c.s.shutdown_ok("bye");
}

#[test]
fn unsafe_or_malformed_histories_are_session_invalid() {
    let env = Env::new();
    let dir = sessions_dir(&env);
    // Malformed JSON on a complete line.
    let mut b = jsonl(&[meta(&env, "badjson")]);
    b.extend_from_slice(b"{\"type\":\"title\",\"session_id\":\"badjson\",\n");
    write_raw(&env, "badjson.jsonl", &b);
    // A record of another session.
    write_history(
        &env,
        "otherid",
        &[
            meta(&env, "otherid"),
            rec("title", "someone-else", &json!({ "title": "t" })),
        ],
    );
    // A stored diagnostic record.
    write_history(
        &env,
        "diag",
        &[
            meta(&env, "diag"),
            rec(
                "diagnostic",
                "diag",
                &json!({ "code": "x", "summary": "y" }),
            ),
        ],
    );
    // A symlink named like a history, pointing at a valid history of the same ID.
    let target = env.root.join("outside.jsonl");
    fs::write(&target, jsonl(&[meta(&env, "link")])).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("link.jsonl")).unwrap();
    // A FIFO (nobody writes to it: a blocking open would hang).
    mkfifo(&dir.join("x.jsonl"));
    // A directory.
    fs::create_dir(dir.join("dir.jsonl")).unwrap();
    // A record without a valid timestamp.
    write_history(
        &env,
        "badts",
        &[rec("session_meta", "badts", &json!({ "ts": "yesterday" }))],
    );

    let mut c = Client::start(&env, &BASE);
    let home = env.home().to_string_lossy().into_owned();
    for id in ["badjson", "otherid", "diag", "link", "x", "dir", "badts"] {
        let rid = c.next_id();
        c.s.request(&rid, "session.open", &json!({ "session_id": id }));
        let f = c.s.next_within(Duration::from_secs(5));
        assert_error(&f, Some(&rid), "session_invalid");
        // {"code"} only (checked by the harness), and no path or content anywhere.
        let raw = f.to_string();
        assert!(!raw.contains(&home) && !raw.contains(".jsonl"), "{raw}");
        assert!(!raw.contains("someone-else"), "{raw}");
        assert!(
            c.attached().is_null(),
            "failed open attaches nothing ({id})"
        );
    }
    // Nothing was touched.
    assert!(fs::symlink_metadata(dir.join("link.jsonl"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::metadata(dir.join("dir.jsonl")).unwrap().is_dir());
    assert_eq!(fs::read(&target).unwrap(), jsonl(&[meta(&env, "link")]));
    // Listing omits them all with one bounded notice (and does not hang on the FIFO).
    tiny(&env, "fine");
    let rid = c.next_id();
    c.s.request(&rid, "session.list", &json!({}));
    let f = c.s.next_within(Duration::from_secs(5));
    assert_eq!(f["id"], rid.as_str());
    let r = result(&f);
    check_list(r);
    assert_eq!(ids_of(r["sessions"].as_array().unwrap()), ["fine"], "{r}");
    assert_eq!(r["notices"], json!(["sessions_omitted_invalid"]), "{r}");
    let raw = f.to_string();
    assert!(!raw.contains(&home) && !raw.contains("badjson"), "{raw}");
    // The connection stays usable.
    c.status();
    c.s.shutdown_ok("bye");
}

#[test]
fn interrupted_turns_are_partial_not_invalid() {
    let env = Env::new();
    // decisions.md 23: a torn last line (no LF).
    let mut torn = jsonl(&[meta(&env, "torn")]);
    for r in run("torn", "r1", "first", Some("reply one")) {
        torn.extend(jsonl(&[r]));
    }
    torn.extend(jsonl(&[rec(
        "user_input",
        "torn",
        &json!({ "run_id": "r2", "text": "second" }),
    )]));
    torn.extend_from_slice(
        br#"{"type":"assistant_message","session_id":"torn","ts":"2026-11-30T1"#,
    );
    let torn_path = write_raw(&env, "torn.jsonl", &torn);
    // A torn fragment that is the whole file.
    write_raw(&env, "onlytorn.jsonl", br#"{"type":"session_meta","#);
    // A turn without durable completion (complete lines only).
    let mut open_run = vec![meta(&env, "openrun")];
    open_run.extend(run("openrun", "r1", "done", Some("ok")));
    open_run.push(rec(
        "user_input",
        "openrun",
        &json!({ "run_id": "r2", "text": "never finished" }),
    ));
    open_run.push(rec(
        "assistant_chunk",
        "openrun",
        &json!({ "run_id": "r2", "message_id": "a2", "text": "half a rep" }),
    ));
    write_history(&env, "openrun", &open_run);
    // A recorded failed turn: partial reply kept, projection complete.
    let failed = vec![
        meta(&env, "failed"),
        rec(
            "user_input",
            "failed",
            &json!({ "run_id": "r1", "text": "try" }),
        ),
        rec(
            "assistant_chunk",
            "failed",
            &json!({ "run_id": "r1", "message_id": "a1", "text": "par" }),
        ),
        rec(
            "run_finished",
            "failed",
            &json!({ "run_id": "r1", "outcome": "failed" }),
        ),
    ];
    write_history(&env, "failed", &failed);

    let mut c = Client::start(&env, &BASE);
    let r = c.open("torn");
    assert_eq!(r["durable"], true);
    assert_eq!(r["notices"], json!([]));
    let rev = r["revision"].as_str().unwrap().to_owned();
    let p = c.page("torn", &rev, None);
    assert_eq!(
        p["complete"], false,
        "an interrupted turn is incomplete: {p}"
    );
    assert!(p["next_cursor"].is_null());
    let entries = p["entries"].as_array().unwrap();
    let last = entries.last().unwrap();
    assert_eq!(last["kind"], "diagnostic", "{p}");
    assert_eq!(last["partial"], true, "{p}");
    let m = messages(entries);
    assert_eq!(
        m[..3],
        [
            ("user".to_owned(), "first".to_owned(), false),
            ("assistant".to_owned(), "reply one".to_owned(), false),
            ("user".to_owned(), "second".to_owned(), false),
        ]
    );
    assert_eq!(m.len(), 4, "{m:?}");
    // Readers ignore the fragment; only an owner's append cuts it.
    assert_eq!(fs::read(&torn_path).unwrap(), torn);

    let r = c.open("onlytorn");
    assert_eq!(r["durable"], true);
    let p = c.page("onlytorn", r["revision"].as_str().unwrap(), None);
    assert_eq!(p["complete"], false, "{p}");
    let e = p["entries"].as_array().unwrap();
    assert_eq!(e.last().unwrap()["kind"], "diagnostic", "{p}");
    assert_eq!(e.last().unwrap()["partial"], true, "{p}");

    let rev = c.open_rev("openrun");
    let p = c.page("openrun", &rev, None);
    assert_eq!(p["complete"], false, "{p}");
    let e = p["entries"].as_array().unwrap();
    assert_eq!(e.last().unwrap()["kind"], "diagnostic", "{p}");
    assert_eq!(e.last().unwrap()["partial"], true, "{p}");
    let m = messages(e);
    assert!(
        m.contains(&("assistant".into(), "half a rep".into(), true)),
        "the unfinished reply is partial: {m:?}"
    );

    let rev = c.open_rev("failed");
    let p = c.page("failed", &rev, None);
    assert_eq!(
        p["complete"], true,
        "a recorded failed turn is complete: {p}"
    );
    let m = messages(p["entries"].as_array().unwrap());
    assert_eq!(m[0], ("user".into(), "try".into(), false));
    assert_eq!(m[1].0, "assistant");
    assert_eq!(m[1].1, "par", "the partial reply is kept");
    assert!(
        m.iter().all(|x| x.0 != "diagnostic"),
        "no interruption diagnostic for a finished run: {m:?}"
    );

    // Listing shows the torn history too (never invalid).
    let (all, first) = c.list_all(100);
    assert_eq!(first["notices"], json!([]), "{first}");
    let ids = ids_of(&all);
    assert_eq!(ids, ["failed", "onlytorn", "openrun", "torn"]);
    c.s.shutdown_ok("bye");
}

#[test]
fn recorded_cwd_must_be_the_childs_canonical_cwd() {
    let env = Env::new();
    let other = env.root.join("other");
    fs::create_dir(&other).unwrap();
    let alias = env.root.join("alias");
    std::os::unix::fs::symlink(&env.cwd, &alias).unwrap();
    let cwd = canonical_cwd(&env);
    let with_cwd = |id: &str, cwd: &str| {
        vec![
            rec("session_meta", id, &json!({ "cwd": cwd })),
            rec("title", id, &json!({ "title": format!("title of {id}") })),
        ]
    };
    write_history(&env, "other", &with_cwd("other", other.to_str().unwrap()));
    write_history(&env, "relative", &with_cwd("relative", "cwd"));
    write_history(&env, "dot", &with_cwd("dot", "."));
    write_history(
        &env,
        "gone",
        &with_cwd("gone", env.root.join("deleted").to_str().unwrap()),
    );
    let mut mixed = with_cwd("mixed", &cwd);
    mixed.push(rec(
        "session_meta",
        "mixed",
        &json!({ "cwd": other.to_str().unwrap() }),
    ));
    write_history(&env, "mixed", &mixed);
    write_history(&env, "alias", &with_cwd("alias", alias.to_str().unwrap()));
    write_history(
        &env,
        "dotted",
        &with_cwd("dotted", &format!("{cwd}/../cwd/.")),
    );
    write_history(&env, "exact", &with_cwd("exact", &cwd));
    write_history(
        &env,
        "nocwd",
        &[
            rec("session_meta", "nocwd", &json!({})),
            rec("title", "nocwd", &json!({ "title": "legacy" })),
        ],
    );
    write_raw(&env, "empty.jsonl", b"");

    let mut c = Client::start(&env, &BASE);
    for id in ["other", "relative", "dot", "gone", "mixed"] {
        c.fails("session.open", &json!({ "session_id": id }), "cwd_mismatch");
        assert!(c.attached().is_null());
    }
    for id in ["alias", "dotted", "exact"] {
        let r = c.open(id);
        assert_eq!(r["durable"], true, "{r}");
        assert_eq!(r["notices"], json!([]), "{r}");
    }
    // No recorded cwd: cwd_unverified, never fabricated verification.
    let r = c.open("nocwd");
    assert_eq!(r["durable"], true, "{r}");
    assert_eq!(r["notices"], json!(["cwd_unverified"]), "{r}");
    // decisions.md 11: an empty file is durable, unverified, and empty.
    let r = c.open("empty");
    assert_eq!(r["durable"], true, "{r}");
    assert_eq!(r["notices"], json!(["cwd_unverified"]), "{r}");
    let p = c.page("empty", r["revision"].as_str().unwrap(), None);
    assert_eq!(p["entries"], json!([]));
    assert_eq!(p["complete"], true);
    assert!(p["next_cursor"].is_null());

    // Listing applies the same rule (from a child attached elsewhere: this child's own
    // attachment is always available to it).
    c.open("exact");
    let (all, first) = c.list_all(100);
    assert_eq!(first["notices"], json!([]), "{first}");
    let got = by_id(&all);
    let ids: BTreeSet<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        BTreeSet::from(["alias", "dotted", "empty", "exact", "nocwd"]),
        "wrong-workspace, relative and missing cwds are excluded"
    );
    for id in ["nocwd", "empty"] {
        assert_eq!(got[id]["eligibility"], "cwd_unverified", "{}", got[id]);
        assert_eq!(got[id]["notices"], json!(["cwd_unverified"]), "{}", got[id]);
    }
    for id in ["alias", "dotted", "exact"] {
        assert_eq!(got[id]["eligibility"], "available", "{}", got[id]);
        assert_eq!(got[id]["notices"], json!([]), "{}", got[id]);
    }
    assert!(got["empty"]["updated_at"].is_null());
    assert!(got["empty"]["title"].is_null());
    c.s.shutdown_ok("bye");
}

#[test]
fn oversized_histories_are_history_limit() {
    let env = Env::new();
    // Over 64 MiB of valid lines.
    {
        let path = sessions_dir(&env).join("bytes.jsonl");
        let mut f = std::io::BufWriter::new(fs::File::create(&path).unwrap());
        f.write_all(&jsonl(&[meta(&env, "bytes")])).unwrap();
        let line = jsonl(&[rec(
            "title",
            "bytes",
            &json!({ "title": "t".repeat(1 << 20) }),
        )]);
        let mut written = 0;
        while written <= 64 << 20 {
            f.write_all(&line).unwrap();
            written += line.len();
        }
        f.flush().unwrap();
    }
    // Over 100,000 lines (about 8 MiB), and exactly 100,000 lines (within the budget).
    let many_lines = |id: &str, n: usize| {
        let mut v = jsonl(&[meta(&env, id)]);
        let short = jsonl(&[rec("title", id, &json!({ "title": "t" }))]);
        for _ in 1..n {
            v.extend_from_slice(&short);
        }
        v
    };
    write_raw(&env, "lines.jsonl", &many_lines("lines", 100_001));
    let at_limit = many_lines("atlimit", 100_000);
    write_raw(&env, "atlimit.jsonl", &at_limit);
    // Over 10,000 projected parts.
    let mut parts = vec![meta(&env, "parts")];
    for i in 0..10_001 {
        parts.push(rec(
            "user_input",
            "parts",
            &json!({ "run_id": format!("r{i}"), "text": "p" }),
        ));
        parts.push(rec(
            "run_finished",
            "parts",
            &json!({ "run_id": format!("r{i}"), "outcome": "completed" }),
        ));
    }
    write_history(&env, "parts", &parts);
    // Over 8 MiB of serialized projection in fewer parts.
    let mut projected = vec![meta(&env, "projbytes")];
    let text = "word ".repeat(3_200);
    for i in 0..600 {
        projected.extend(run("projbytes", &format!("r{i}"), &text, None));
    }
    write_history(&env, "projbytes", &projected);
    tiny(&env, "keep");

    let mut c = Client::start(&env, &BASE);
    let rev = c.open_rev("keep");
    for id in ["bytes", "lines", "parts", "projbytes"] {
        c.fails(
            "session.open",
            &json!({ "session_id": id }),
            "history_limit",
        );
        assert_eq!(c.attached(), "keep", "after {id}");
    }
    c.page("keep", &rev, None);
    let r = c.open("atlimit");
    assert_eq!(r["durable"], true);
    c.s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------------
// Ownership across children

#[test]
fn ownership_across_two_children() {
    let env = Env::new();
    let mut x = vec![meta(&env, "shared")];
    x.extend(run("shared", "r1", "hi", Some("there")));
    write_history(&env, "shared", &x);
    tiny(&env, "free");

    let mut c1 = Client::start(&env, &BASE);
    let mut c2 = Client::start(&env, &BASE);
    let r = c1.open("shared");
    assert_eq!(r["durable"], true);

    // decisions.md 21: another child's open is session_busy, its list shows busy.
    c2.fails(
        "session.open",
        &json!({ "session_id": "shared" }),
        "session_busy",
    );
    assert!(c2.attached().is_null());
    let (l2, _) = c2.list_all(100);
    let l2 = by_id(&l2);
    assert_eq!(l2["shared"]["eligibility"], "busy", "{}", l2["shared"]);
    assert_eq!(l2["free"]["eligibility"], "available", "{}", l2["free"]);
    // The owner's own listing shows it available.
    let (l1, _) = c1.list_all(100);
    let l1 = by_id(&l1);
    assert_eq!(l1["shared"]["eligibility"], "available", "{}", l1["shared"]);

    // c2 attaches something else; a failed busy open keeps it.
    let rev_free = c2.open_rev("free");
    c2.fails(
        "session.open",
        &json!({ "session_id": "shared" }),
        "session_busy",
    );
    assert_eq!(c2.attached(), "free");
    c2.page("free", &rev_free, None);
    // And now c1 cannot take "free".
    c1.fails(
        "session.open",
        &json!({ "session_id": "free" }),
        "session_busy",
    );
    assert_eq!(c1.attached(), "shared");

    // After c1 exits, c2 can open it.
    c1.s.shutdown_ok("bye");
    drop(c1);
    let r = c2.open("shared");
    assert_eq!(r["durable"], true);
    let (entries, _) = c2.page_all("shared", r["revision"].as_str().unwrap());
    assert_eq!(messages(&entries).len(), 2);
    let (l2, _) = c2.list_all(100);
    let l2 = by_id(&l2);
    assert_eq!(l2["shared"]["eligibility"], "available", "{}", l2["shared"]);
    // c2 switched away from "free": its lease is released.
    assert_eq!(l2["free"]["eligibility"], "available", "{}", l2["free"]);
    let mut c3 = Client::start(&env, &BASE);
    c3.open("free");
    c3.s.shutdown_ok("bye");
    c2.s.shutdown_ok("bye");
}

#[test]
fn a_stale_lock_file_lists_busy_but_opens() {
    let env = Env::new();
    tiny(&env, "crashed");
    tiny(&env, "other");
    write_raw(&env, "crashed.writer.lock", b"999999\n");
    let mut c = Client::start(&env, &BASE);
    let (l, _) = c.list_all(100);
    let l = by_id(&l);
    assert_eq!(
        l["crashed"]["eligibility"], "busy",
        "conservative: {}",
        l["crashed"]
    );
    assert_eq!(l["other"]["eligibility"], "available");
    // Listing never removes a lease file.
    assert!(sessions_dir(&env).join("crashed.writer.lock").exists());
    let r = c.open("crashed");
    assert_eq!(r["durable"], true);
    assert_eq!(c.attached(), "crashed");
    let (l, _) = c.list_all(100);
    assert_eq!(by_id(&l)["crashed"]["eligibility"], "available");
    c.s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------------
// session.list

#[test]
fn list_orders_pages_and_describes_sessions() {
    let env = Env::new();
    let long_title = "Überlange Überschrift über sehr viele Dinge, die immer weiter geht und geht";
    assert!(long_title.chars().count() > 50);
    // Created in descending order: the listing must not follow creation or mtime.
    let ids = [
        "zeta", "b", "a", "_under", "Z9", "A", "-dash", "9lives", "a-b_c",
    ];
    for id in ids {
        let mut r = vec![meta(&env, id)];
        match id {
            "zeta" => r.push(rec("title", id, &json!({ "title": long_title }))),
            "b" => {
                r.push(rec("title", id, &json!({ "title": "first" })));
                r.push(rec("title", id, &json!({ "title": "second" })));
            }
            "a" => {
                let mut t = rec("title", id, &json!({ "title": "times" }));
                t["ts"] = json!("2026-11-30T12:00:00Z");
                r.push(t);
                for ts in [
                    "2026-12-01T08:00:00+02:00",
                    "2026-12-01T05:59:59.999Z",
                    "2026-11-30T21:30:00-08:00",
                ] {
                    let mut u = rec("title", id, &json!({ "title": "times" }));
                    u["ts"] = json!(ts);
                    r.push(u);
                }
            }
            "A" => r.extend(run(id, "r1", "a prompt is never a title", Some("reply"))),
            _ => {}
        }
        write_history(&env, id, &r);
        thread::sleep(Duration::from_millis(2));
    }
    // Not listed: other workspace, malformed, subagent/archive histories, non-session names.
    write_history(
        &env,
        "elsewhere",
        &[rec("session_meta", "elsewhere", &json!({ "cwd": "/" }))],
    );
    write_raw(&env, "malformed.jsonl", b"[1,2,3]\n");
    write_raw(&env, "readme.txt", b"not a session");
    write_raw(&env, "zeta.writer.lock.old", b"");
    for sub in ["subagents", "archive"] {
        let d = sessions_dir(&env).join(sub);
        fs::create_dir(&d).unwrap();
        fs::write(
            d.join("hidden.jsonl"),
            jsonl(&[rec("session_meta", "hidden", &json!({}))]),
        )
        .unwrap();
    }

    let mut c = Client::start(&env, &BASE);
    let full = c.ok("session.list", &json!({}));
    check_list(&full);
    assert_eq!(full["complete"], true);
    assert!(full["next_cursor"].is_null());
    assert_eq!(
        full["notices"],
        json!(["sessions_omitted_invalid"]),
        "one bounded notice for the malformed history: {full}"
    );
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    assert_eq!(ids_of(full["sessions"].as_array().unwrap()), sorted);
    assert_eq!(
        sorted,
        ["-dash", "9lives", "A", "Z9", "_under", "a", "a-b_c", "b", "zeta"]
    );
    let e = by_id(full["sessions"].as_array().unwrap());
    let cut: String = long_title.chars().take(50).collect();
    assert_eq!(e["zeta"]["title"], cut.as_str(), "cut to 50 characters");
    assert_eq!(e["b"]["title"], "second", "the latest title record");
    assert!(e["A"]["title"].is_null(), "never derived from a prompt");
    assert!(e["9lives"]["title"].is_null());
    assert_instant(&e["a"]["updated_at"], "2026-12-01T06:00:00");
    assert_instant(&e["9lives"]["updated_at"], "2026-11-30T12:00:00");
    for v in e.values() {
        assert_eq!(v["eligibility"], "available", "{v}");
        assert_eq!(v["notices"], json!([]), "{v}");
    }

    // Paging with limit 2: same order, same entries, one revision.
    let first = c.list(2);
    let rev = first["revision"].as_str().unwrap().to_owned();
    assert_ne!(rev, full["revision"].as_str().unwrap(), "decisions.md 12");
    let mut paged: Vec<Value> = first["sessions"].as_array().unwrap().clone();
    assert_eq!(paged.len(), 2);
    let mut r = first;
    let mut pages = 1;
    while let Some(cur) = r["next_cursor"].as_str().map(str::to_owned) {
        r = c.list_more(&rev, &cur, 2);
        assert!(r["sessions"].as_array().unwrap().len() <= 2);
        assert_eq!(r["notices"], json!(["sessions_omitted_invalid"]));
        paged.extend(r["sessions"].as_array().unwrap().iter().cloned());
        pages += 1;
    }
    assert_eq!(pages, 5);
    assert_eq!(r["complete"], true);
    assert_eq!(&paged, full["sessions"].as_array().unwrap());

    // Limit 1 and 100 are accepted.
    let one = c.list(1);
    assert_eq!(one["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(one["complete"], false);
    let hundred = c.list(100);
    assert_eq!(hundred["sessions"].as_array().unwrap().len(), ids.len());
    c.ok("session.list", &json!({ "revision": null, "cursor": null }));
    c.ok("session.list", &json!({ "limit": 7 }));
    // Invalid params.
    let one_rev = one["revision"].as_str().unwrap();
    let one_cur = one["next_cursor"].as_str().unwrap();
    for bad in [
        json!({ "limit": 0 }),
        json!({ "limit": 101 }),
        json!({ "limit": -1 }),
        json!({ "limit": 1.5 }),
        json!({ "limit": "5" }),
        json!({ "revision": one_rev }),
        json!({ "revision": one_rev, "cursor": null }),
        json!({ "cursor": one_cur }),
        json!({ "revision": null, "cursor": one_cur }),
        json!({ "revision": "bad revision", "cursor": one_cur }),
        json!({ "revision": one_rev, "cursor": "x".repeat(65) }),
        json!({ "unknown": 1 }),
        json!([]),
    ] {
        c.fails("session.list", &bad, "invalid_params");
    }
    c.s.shutdown_ok("bye");
}

#[test]
fn list_revisions_are_replaced_and_invalidated_stickily() {
    let env = Env::new();
    let mut paths = HashMap::new();
    for id in ["s1", "s2", "s3", "s4"] {
        paths.insert(id, tiny(&env, id));
    }
    let mut c = Client::start(&env, &BASE);
    let p = |rev: &str, cur: &str| json!({ "revision": rev, "cursor": cur, "limit": 1 });

    let a = c.list(1);
    let (rev_a, cur_a) = (
        a["revision"].as_str().unwrap().to_owned(),
        a["next_cursor"].as_str().unwrap().to_owned(),
    );
    // decisions.md 12: a fresh listing makes the previous revision stale.
    let b = c.list(1);
    let (rev_b, cur_b) = (
        b["revision"].as_str().unwrap().to_owned(),
        b["next_cursor"].as_str().unwrap().to_owned(),
    );
    assert_ne!(rev_a, rev_b);
    c.fails("session.list", &p(&rev_a, &cur_a), "stale_revision");
    c.fails("session.list", &p(&rev_b, &cur_a), "stale_revision");
    c.fails("session.list", &p(&rev_a, &cur_b), "stale_revision");
    c.fails("session.list", &p(&rev_b, "never-issued"), "stale_revision");
    // Those failures do not touch the current snapshot.
    let b2 = c.list_more(&rev_b, &cur_b, 1);
    assert_eq!(ids_of(b2["sessions"].as_array().unwrap()), ["s2"]);
    let cur_b2 = b2["next_cursor"].as_str().unwrap().to_owned();

    // A history changes: the continuation is stale, and stays stale after restoring it.
    let saved = save(&paths["s3"]);
    append_line(
        &paths["s3"],
        &rec("title", "s3", &json!({ "title": "new" })),
    );
    c.fails("session.list", &p(&rev_b, &cur_b2), "stale_revision");
    restore(&saved);
    c.fails("session.list", &p(&rev_b, &cur_b2), "stale_revision");
    c.fails("session.list", &p(&rev_b, &cur_b), "stale_revision");

    // A fresh listing works again; an added lease file is a mutation too.
    let d = c.list(2);
    let (rev_d, cur_d) = (
        d["revision"].as_str().unwrap().to_owned(),
        d["next_cursor"].as_str().unwrap().to_owned(),
    );
    let d2 = c.list_more(&rev_d, &cur_d, 1);
    let cur_d2 = d2["next_cursor"].as_str().unwrap().to_owned();
    let lock = write_raw(&env, "s4.writer.lock", b"");
    c.fails("session.list", &p(&rev_d, &cur_d2), "stale_revision");
    fs::remove_file(&lock).unwrap();
    c.fails("session.list", &p(&rev_d, &cur_d2), "stale_revision");

    // A new history is a mutation too.
    let e = c.list(1);
    let (rev_e, cur_e) = (
        e["revision"].as_str().unwrap().to_owned(),
        e["next_cursor"].as_str().unwrap().to_owned(),
    );
    tiny(&env, "s5");
    c.fails("session.list", &p(&rev_e, &cur_e), "stale_revision");
    // A vanished history as well.
    let f = c.list(1);
    let (rev_f, cur_f) = (
        f["revision"].as_str().unwrap().to_owned(),
        f["next_cursor"].as_str().unwrap().to_owned(),
    );
    fs::remove_file(&paths["s1"]).unwrap();
    c.fails("session.list", &p(&rev_f, &cur_f), "stale_revision");
    // Attaching a session changes the snapshot's attachment component.
    let g = c.list(1);
    let (rev_g, cur_g) = (
        g["revision"].as_str().unwrap().to_owned(),
        g["next_cursor"].as_str().unwrap().to_owned(),
    );
    c.open("s2");
    c.fails("session.list", &p(&rev_g, &cur_g), "stale_revision");
    let (all, _) = c.list_all(1);
    assert_eq!(ids_of(&all), ["s2", "s3", "s4", "s5"]);
    c.s.shutdown_ok("bye");
}

#[test]
fn directory_and_session_bounds_are_discovery_limit() {
    let env = Env::new();
    tiny(&env, "only");
    let dir = sessions_dir(&env);
    for i in 0..4_095 {
        fs::write(dir.join(format!("n{i}.txt")), b"").unwrap();
    }
    let mut c = Client::start(&env, &BASE);
    // 4,096 names: fine.
    let r = c.list(100);
    assert_eq!(ids_of(r["sessions"].as_array().unwrap()), ["only"]);
    // 4,097 names: discovery_limit; a status right behind it is still answered.
    fs::write(dir.join("n4095.txt"), b"").unwrap();
    let list_id = c.send("session.list", &json!({}));
    let status_id = c.send("status", &json!({}));
    let got = c.s.responses(&[&list_id, &status_id]);
    assert_error(&got[&list_id], Some(&list_id), "discovery_limit");
    assert_eq!(result(&got[&status_id])["readiness"], "ready");
    // No partial page; the connection stays usable.
    for i in 0..4_096 {
        fs::remove_file(dir.join(format!("n{i}.txt"))).unwrap();
    }
    // 256 histories: fine.
    for i in 1..256 {
        fs::write(
            dir.join(format!("h{i:03}.jsonl")),
            jsonl(&[rec("session_meta", &format!("h{i:03}"), &json!({}))]),
        )
        .unwrap();
    }
    let (all, _) = c.list_all(100);
    assert_eq!(all.len(), 256);
    // 257 histories: discovery_limit.
    let extra = tiny(&env, "one-more");
    c.fails("session.list", &json!({}), "discovery_limit");
    c.status();
    fs::remove_file(extra).unwrap();
    c.list(100);
    // One history over the per-file line bound (10,000 lines): discovery_limit, no partial page.
    let mut long = vec![rec("session_meta", "h001", &json!({}))];
    long.extend((0..10_000).map(|_| rec("title", "h001", &json!({ "title": "t" }))));
    write_history(&env, "h001", &long);
    c.fails("session.list", &json!({}), "discovery_limit");
    long.pop();
    write_history(&env, "h001", &long);
    let (all, _) = c.list_all(100);
    assert_eq!(all.len(), 256, "exactly 10,000 lines is within the bound");
    c.s.shutdown_ok("bye");
}

#[test]
fn unusable_inventory_is_discovery_unavailable() {
    let env = Env::new();
    tiny(&env, "good");
    let mut c = Client::start(&env, &BASE);
    for name in [
        "bad.name.jsonl",
        ".jsonl",
        &format!("{}.jsonl", "x".repeat(65)),
    ] {
        let p = write_raw(&env, name, &jsonl(&[meta(&env, "good")]));
        c.fails("session.list", &json!({}), "discovery_unavailable");
        fs::remove_file(p).unwrap();
        c.list(100);
    }
    c.s.shutdown_ok("bye");

    // The sessions folder replaced by a symlink to another folder.
    let env = Env::new();
    let real = env.home().join("real-sessions");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&real)
        .unwrap();
    fs::write(real.join("good.jsonl"), jsonl(&[meta(&env, "good")])).unwrap();
    std::os::unix::fs::symlink(&real, env.home().join("sessions")).unwrap();
    let mut c = Client::start(&env, &BASE);
    c.fails("session.list", &json!({}), "discovery_unavailable");
    c.status();
    c.s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------------
// session.discover

#[test]
fn discover_needs_negotiation_and_pages_provisionally() {
    let env = Env::new();
    let dir = sessions_dir(&env);
    let cwd = canonical_cwd(&env);
    let mut want = Vec::new();
    for i in 0..250 {
        let id = format!("d{i:03}");
        fs::write(
            dir.join(format!("{id}.jsonl")),
            jsonl(&[rec("session_meta", &id, &json!({ "cwd": cwd }))]),
        )
        .unwrap();
        want.push(id);
    }

    // Without negotiation: unsupported, and no discover_* limits.
    let (mut base, init) = Client::start_with_result(&env, &BASE);
    let limits = init["limits"].as_object().unwrap();
    assert!(
        !limits.keys().any(|k| k.starts_with("discover_")),
        "discover_* limits only when negotiated: {limits:?}"
    );
    assert_limits(limits, &[]);
    base.fails(
        "session.discover",
        &json!({ "cursor": null, "limit": 10 }),
        "unsupported_capability",
    );
    base.fails(
        "operation.cancel",
        &json!({ "request_id": "q1" }),
        "unsupported_capability",
    );
    base.s.shutdown_ok("bye");

    let (mut c, init) = Client::start_with_result(&env, &["session.discover"]);
    assert_limits(init["limits"].as_object().unwrap(), &DISCOVER_LIMITS);

    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let r = c.ok(
            "session.discover",
            &json!({ "cursor": cursor, "limit": 100 }),
        );
        pages += 1;
        assert_keys(&r, &DISCOVER_KEYS);
        assert_eq!(r["provisional"], true, "{r}");
        assert!(serde_json::to_string(&r).unwrap().len() <= 32_768);
        let s = r["sessions"].as_array().unwrap();
        assert!(s.len() <= 100);
        for e in s {
            check_list_entry(e);
            assert_eq!(e["eligibility"], "available", "{e}");
        }
        got.extend(ids_of(s));
        match r["next_cursor"].as_str() {
            Some(cur) => {
                assert_eq!(r["complete"], false, "{r}");
                assert!(is_opaque_id(cur));
                cursor = Some(cur.to_owned());
            }
            None => {
                assert_eq!(r["complete"], true, "{r}");
                break;
            }
        }
        assert!(pages < 20, "discover cursor chain does not end");
    }
    assert!(pages >= 3, "250 entries at 100 per page: {pages} pages");
    assert_eq!(got, want, "every session once, ascending");
    // Omitted fields default; bad params are invalid_params.
    let r = c.ok("session.discover", &json!({}));
    assert_eq!(r["sessions"].as_array().unwrap().len(), 100);
    for bad in [
        json!({ "limit": 0 }),
        json!({ "limit": 101 }),
        json!({ "cursor": "a b" }),
        json!({ "revision": null }),
    ] {
        c.fails("session.discover", &bad, "invalid_params");
    }
    c.s.shutdown_ok("bye");
}

/// The bounds `session.discover` adds to `limits` when negotiated
/// (`docs/extensions/session-discover.md`).
const DISCOVER_LIMITS: [(&str, u64); 9] = [
    ("discover_page_bytes", 32_768),
    ("discover_page_entries", 100),
    ("discover_candidates", 256),
    ("discover_session_bytes", 8_388_608),
    ("discover_session_lines", 10_000),
    ("discover_scan_bytes", 67_108_864),
    ("discover_scan_lines", 100_000),
    ("discover_scan_ms", 2_000),
    ("discover_title_bytes", 256),
];

/// `limits` is exactly the base bounds plus `extra` (`decisions.md` 9).
#[track_caller]
fn assert_limits(limits: &serde_json::Map<String, Value>, extra: &[(&str, u64)]) {
    let want: HashMap<&str, u64> = BASE_LIMITS.iter().chain(extra).copied().collect();
    let got: HashMap<&str, u64> = limits
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_u64().expect("integer limit")))
        .collect();
    assert_eq!(got, want, "initialize limits");
}

// ---------------------------------------------------------------------------------------------
// Cancellation and the one-operation rule

/// 256 histories of ~200 KB each: a listing that takes a while.
fn slow_folder(env: &Env) {
    let dir = sessions_dir(env);
    let cwd = canonical_cwd(env);
    let filler = "lorem ipsum dolor sit amet ".repeat(740);
    for i in 0..256 {
        let id = format!("big{i:03}");
        let mut recs = vec![rec("session_meta", &id, &json!({ "cwd": cwd }))];
        for r in 0..10 {
            recs.extend(run(&id, &format!("r{r}"), &filler, None));
        }
        fs::write(dir.join(format!("{id}.jsonl")), jsonl(&recs)).unwrap();
    }
}

/// Asserts the list/cancel pair is consistent: either the cancel was accepted and the list
/// answered `operation_cancelled`, or the list had finished and the cancel is stale.
#[track_caller]
fn assert_cancel_pair(list: &Value, cancel: &Value) -> bool {
    if cancel.get("result").is_some() {
        assert_eq!(
            result(cancel),
            &json!({ "cancellation_requested": true }),
            "{cancel}"
        );
        assert_eq!(error_code(list), "operation_cancelled", "{list}");
        true
    } else {
        assert_eq!(error_code(cancel), "stale_operation", "{cancel}");
        assert!(
            list.get("result").is_some() || error_code(list) == "discovery_limit",
            "a finished list answers normally: {list}"
        );
        false
    }
}

#[test]
fn slow_listing_cancel_busy_and_shutdown() {
    let env = Env::new();
    slow_folder(&env);
    let mut c = Client::start(&env, &["status", "shutdown", "operation.cancel"]);

    // Unknown and finished request IDs are stale.
    c.fails(
        "operation.cancel",
        &json!({ "request_id": "never-sent" }),
        "stale_operation",
    );
    let done = c.send("session.create", &json!({}));
    let created_result = result(&c.s.response(&done)).clone();
    let created = created_result["session_id"].as_str().unwrap().to_owned();
    let created_rev = created_result["revision"].as_str().unwrap().to_owned();
    c.fails(
        "operation.cancel",
        &json!({ "request_id": done }),
        "stale_operation",
    );
    c.fails(
        "operation.cancel",
        &json!({ "request_id": "bad id" }),
        "invalid_params",
    );

    // A listing followed immediately by its cancellation.
    let list_id = c.send("session.list", &json!({}));
    let cancel_id = c.send("operation.cancel", &json!({ "request_id": list_id }));
    let got = c.s.responses(&[&list_id, &cancel_id]);
    assert_cancel_pair(&got[&list_id], &got[&cancel_id]);
    // The worker slot stays busy until a cancelled worker actually stops.
    let free = json!({ "session_id": created, "revision": created_rev, "cursor": null });
    result(&c.call_when_free("history.page", &free));
    // Both in one write: the list is certainly still running when the cancel arrives.
    let list_id = c.next_id();
    let cancel_id = c.next_id();
    c.s.send_raw(format!(
        "{}\n{}\n",
        frame(&list_id, "session.list", &json!({})),
        frame(
            &cancel_id,
            "operation.cancel",
            &json!({ "request_id": list_id })
        )
    ));
    let got = c.s.responses(&[&list_id, &cancel_id]);
    assert!(
        assert_cancel_pair(&got[&list_id], &got[&cancel_id]),
        "a cancel admitted with the list finds it in flight: {:?}",
        got
    );
    // A second cancel of the same request is stale (it was already answered).
    c.fails(
        "operation.cancel",
        &json!({ "request_id": list_id }),
        "stale_operation",
    );

    // One operation at a time: overlap is busy, without cancelling the first. Sent in one
    // write, the open and create are admitted while the list certainly runs.
    result(&c.call_when_free("history.page", &free));
    let list_id = c.next_id();
    let open_id = c.next_id();
    let create_id = c.next_id();
    c.s.send_raw(format!(
        "{}\n{}\n{}\n",
        frame(&list_id, "session.list", &json!({})),
        frame(&open_id, "session.open", &json!({ "session_id": "big000" })),
        frame(&create_id, "session.create", &json!({})),
    ));
    let got = c.s.responses(&[&list_id, &open_id, &create_id]);
    assert_error(&got[&open_id], Some(&open_id), "busy");
    assert_error(&got[&create_id], Some(&create_id), "busy");
    let list = &got[&list_id];
    assert!(
        list.get("result").is_some() || error_code(list) == "discovery_limit",
        "busy never cancels the running list: {list}"
    );
    // Sent separately: whichever answer comes second may be anything, but an open answered
    // before the list it followed overlapped it and is busy. A status in between is answered.
    let list_id = c.send("session.list", &json!({}));
    let open_id = c.send("session.open", &json!({ "session_id": "no-such-session" }));
    let status_id = c.send("status", &json!({}));
    let mut order = Vec::new();
    let mut got = HashMap::new();
    while got.len() < 3 {
        let f = c.s.next();
        let id = f["id"].as_str().expect("response id").to_owned();
        assert!(
            [&list_id, &open_id, &status_id].contains(&&id),
            "unexpected {f}"
        );
        order.push(id.clone());
        got.insert(id, f);
    }
    let pos = |id: &str| order.iter().position(|x| x == id).unwrap();
    let open_code = error_code(&got[&open_id]);
    if pos(&open_id) < pos(&list_id) {
        assert_eq!(open_code, "busy", "{:?}", got[&open_id]);
    } else {
        assert!(
            matches!(open_code, "busy" | "session_missing"),
            "{:?}",
            got[&open_id]
        );
    }
    assert_eq!(result(&got[&status_id])["readiness"], "ready");
    let list = &got[&list_id];
    assert!(
        list.get("result").is_some() || error_code(list) == "discovery_limit",
        "{list}"
    );
    // Busy requests changed nothing: the lazy session created above is still attached.
    assert_eq!(c.attached(), created.as_str());
    c.s.shutdown_ok("bye");

    // shutdown during a listing: the listing is cancelled, the child exits 0.
    let mut c = Client::start(&env, &BASE);
    let list_id = c.next_id();
    c.s.send_raw(format!(
        "{}\n{}\n",
        frame(&list_id, "session.list", &json!({})),
        frame("stop", "shutdown", &json!({}))
    ));
    let got = c.s.responses(&[&list_id, "stop"]);
    assert_eq!(result(&got["stop"]), &json!({ "state": "stopping" }));
    assert_error(&got[&list_id], Some(&list_id), "operation_cancelled");
    c.s.expect_eof();
    assert_eq!(c.s.exit_code(), 0);
    c.s.assert_stderr_empty();
}
