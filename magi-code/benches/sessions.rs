//! Sessions of any length (`decisions.md` 47–51): prints one table.
//!
//! For stored histories of 1 MiB, 64 MiB and 1 GiB (synthetic, written here: turns of ten
//! tool calls with 6 KB results, a reply and usage, a compaction every 4 MiB, as a long real
//! session has; then one scripted turn by the owner, which writes its derived metadata):
//!
//! - `session.list` over 256 sessions (255 small ones and the large one), median of fresh
//!   listings in one child;
//! - `session.open` + the first `history.page` of the large one in a fresh child (median of
//!   runs), and that child's peak resident memory (`VmHWM`) after it;
//!
//! beside the floor measured in the same run: the same two operations on a one-turn session.
//! Targets: 1 GiB within 2x of 64 MiB (cost flat past the read window); open + first page of
//! the 64 MiB history at most 100 ms and 32 MiB of peak RSS.
//!
//! Run: `cargo bench -p magi-code --bench sessions` (`MC_BENCH_QUICK=1`: 1 MiB and 64 MiB
//! only, fewer runs). Needs about 1.2 GiB of free disk in the temp folder.

#[path = "support/child.rs"]
mod support;

use serde_json::{json, Value};
use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;
use support::{median, vm_hwm_kib, Child};

const TS: &str = "2026-12-06T12:00:00.000Z";

/// Writes one record as a JSON line.
fn put(w: &mut impl Write, v: &Value) -> usize {
    let mut b = serde_json::to_vec(v).expect("record");
    b.push(b'\n');
    w.write_all(&b).expect("write");
    b.len()
}

/// Writes a history of `id` of at least `target` bytes: turns of ten tool calls, a compaction
/// every 4 MiB.
fn write_history(path: &Path, id: &str, cwd: &str, target: u64) {
    let mut w = BufWriter::with_capacity(1 << 20, fs::File::create(path).expect("create"));
    let rec = |kind: &str, extra: Value| {
        let mut v = json!({"type": kind, "session_id": id, "ts": TS});
        for (k, x) in extra.as_object().expect("object") {
            v[k] = x.clone();
        }
        v
    };
    let mut bytes = put(&mut w, &rec("session_meta", json!({"cwd": cwd}))) as u64;
    let mut records = 1u64;
    let mut since_compaction = 0u64;
    let result = "r".repeat(6_000);
    let reply = "The change is made; the tests pass. ".repeat(40);
    let mut t = 0u64;
    while bytes < target {
        let run = format!("run-{t:08}");
        let input_at = records;
        let mut turn: Vec<Value> = vec![rec(
            "user_input",
            json!({"run_id": run, "message_id": format!("u{t}"), "text": format!("Please look at part {t} of the code and fix what is wrong there.")}),
        )];
        for c in 0..10 {
            let call = format!("call-{t}-{c}");
            let path = format!("src/module_{c}/file_{t}.rs");
            turn.push(rec("activity", json!({"run_id": run, "activity_id": call, "kind": "tool", "state": "started", "name": "read_file", "summary": path})));
            turn.push(rec("tool_call", json!({"run_id": run, "call_id": call, "name": "read_file", "input": {"path": path}})));
            turn.push(rec(
                "tool_result",
                json!({"run_id": run, "call_id": call, "output": result, "is_error": false}),
            ));
            turn.push(rec("activity", json!({"run_id": run, "activity_id": call, "kind": "tool", "state": "completed", "name": "read_file", "summary": format!("{path}: 120 lines")})));
            if c == 4 && since_compaction > 4 << 20 {
                turn.push(rec("compaction", json!({"summary": format!("Summary of the work up to turn {t}: parts read, fixes made, tests run."), "through": input_at})));
                since_compaction = 0;
            }
        }
        turn.push(rec(
            "assistant_message",
            json!({"run_id": run, "message_id": format!("a{t}"), "text": reply}),
        ));
        turn.push(rec(
            "usage",
            json!({"run_id": run, "input_tokens": 120_000, "output_tokens": 900}),
        ));
        turn.push(rec(
            "run_finished",
            json!({"run_id": run, "outcome": "completed"}),
        ));
        for v in &turn {
            let n = put(&mut w, v) as u64;
            bytes += n;
            since_compaction += n;
            records += 1;
        }
        t += 1;
    }
    w.flush().expect("flush");
}

/// A storage root with 255 small sessions and one history of `size` bytes, `big`, whose owner
/// appended one scripted turn (so its derived metadata is there, as for any session in use).
fn prepare(home: &Path, cwd: &Path, size: u64) -> String {
    let sessions = home.join("sessions");
    fs::create_dir_all(&sessions).expect("sessions");
    let cwd_s = fs::canonicalize(cwd)
        .expect("cwd")
        .to_string_lossy()
        .into_owned();
    for i in 0..255 {
        let id = format!("small{i:03}");
        write_history(&sessions.join(format!("{id}.jsonl")), &id, &cwd_s, 4096);
    }
    let big = "big".to_owned();
    write_history(&sessions.join("big.jsonl"), &big, &cwd_s, size);
    let mut c = Child::start(home, cwd);
    let r = c.call("session.open", &json!({"session_id": big}));
    assert!(r.get("result").is_some(), "{r}");
    let r = c.call(
        "turn.start",
        &json!({"session_id": big, "prompt": "one more"}),
    );
    assert!(r.get("result").is_some(), "{r}");
    loop {
        let f = c.next();
        if f["event"] == "run.finished" {
            assert_eq!(f["data"]["outcome"], "completed", "{f}");
            break;
        }
    }
    c.finish();
    big
}

/// Milliseconds of `session.list` in one child, fresh each time.
fn list(home: &Path, cwd: &Path, runs: usize) -> Vec<f64> {
    let mut c = Child::start(home, cwd);
    let mut out = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let r = c.call("session.list", &json!({"limit": 100}));
        out.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(r.get("result").is_some(), "{r}");
        assert_eq!(r["result"]["sessions"].as_array().map(Vec::len), Some(100));
    }
    c.finish();
    out
}

/// Milliseconds of `session.open` + the first `history.page` of `id` in a fresh child, and
/// that child's peak RSS (MiB) after it.
fn open(home: &Path, cwd: &Path, id: &str, runs: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut ms, mut rss) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut c = Child::start(home, cwd);
        let t = Instant::now();
        let r = c.call("session.open", &json!({"session_id": id}));
        let rev = r["result"]["revision"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_owned();
        let p = c.call(
            "history.page",
            &json!({"session_id": id, "revision": rev, "cursor": null}),
        );
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(
            p["result"]["entries"]
                .as_array()
                .is_some_and(|e| !e.is_empty()),
            "{p}"
        );
        rss.push(vm_hwm_kib(c.server.child.id()) / 1024.0);
        c.finish();
    }
    (ms, rss)
}

fn main() {
    let quick = std::env::var_os("MC_BENCH_QUICK").is_some();
    let runs = if quick { 3 } else { 7 };
    let sizes: &[(&str, u64)] = if quick {
        &[("1 MiB", 1 << 20), ("64 MiB", 64 << 20)]
    } else {
        &[("1 MiB", 1 << 20), ("64 MiB", 64 << 20), ("1 GiB", 1 << 30)]
    };
    // The floor: the same operations on a one-turn session, in the same run.
    let floor_dir = tempfile::tempdir().expect("tmp");
    let (fh, fc) = (floor_dir.path().join("home"), floor_dir.path().join("cwd"));
    fs::create_dir_all(&fc).expect("cwd");
    let floor_id = prepare(&fh, &fc, 1);
    let mut floor_list = list(&fh, &fc, runs);
    let (mut floor_open, mut floor_rss) = open(&fh, &fc, &floor_id, runs);
    let (fl, fo, fr) = (
        median(&mut floor_list),
        median(&mut floor_open),
        median(&mut floor_rss),
    );
    println!("| history | session.list, 256 sessions | open + first page | peak RSS after open |");
    println!("| --- | --- | --- | --- |");
    println!("| floor (one turn) | {fl:.1} ms | {fo:.1} ms | {fr:.1} MiB |");
    let mut at = Vec::new();
    for (name, size) in sizes {
        let dir = tempfile::tempdir().expect("tmp");
        let (home, cwd) = (dir.path().join("home"), dir.path().join("cwd"));
        fs::create_dir_all(&cwd).expect("cwd");
        let id = prepare(&home, &cwd, *size);
        let mut l = list(&home, &cwd, runs);
        let (mut o, mut r) = open(&home, &cwd, &id, runs);
        let (l, o, r) = (median(&mut l), median(&mut o), median(&mut r));
        println!(
            "| {name} | {l:.1} ms ({:.1}x floor) | {o:.1} ms ({:.1}x floor) | {r:.1} MiB |",
            l / fl,
            o / fo
        );
        at.push((*name, l, o, r));
    }
    let find = |n: &str| at.iter().find(|x| x.0 == n).copied();
    if let Some((_, _, o, r)) = find("64 MiB") {
        println!();
        println!("64 MiB open + first page: {o:.1} ms (target at most 100 ms), peak RSS {r:.1} MiB (target at most 32 MiB)");
    }
    if let (Some(a), Some(b)) = (find("64 MiB"), find("1 GiB")) {
        println!(
            "1 GiB against 64 MiB: list {:.2}x, open + first page {:.2}x (target within 2x)",
            b.1 / a.1,
            b.2 / a.2
        );
    }
}
