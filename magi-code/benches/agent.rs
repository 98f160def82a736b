//! Agent-loop benchmark: prints one table.
//!
//! - echo turn (`turn.start` → `run.finished`), median of 50 turns in a fresh session and of
//!   50 turns in a session that already holds 4,000 turns; target: the second within 1.5× of
//!   the first (a turn's cost must not grow with the session);
//! - the disk's own fsync'd append median, measured in the same run beside the echo turn (the
//!   echo path does two fsync'd appends per turn);
//! - deltas/s from a loopback SSE server (Chat Completions) through the binary to frames on
//!   stdout, against a floor that reads the same SSE and writes one line per event; target
//!   ≥ 0.5× the floor;
//! - `status` round trip p99 while a stream runs; target < 2 ms.
//!
//! Run: `cargo bench -p magi-code --bench agent` (`MC_BENCH_QUICK=1` for a short run).

#[path = "support/child.rs"]
mod child;
#[path = "support/floor.rs"]
mod floor;

use child::{median, pct, read_body, Child};
use magi_code::client::pipe::Frames;
use serde_json::json;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

impl Child {
    /// One turn: ms from `turn.start` to `run.finished`, the delta frames seen and the bytes
    /// of delta text they carried.
    fn turn(&mut self, sid: &str, prompt: &str) -> (f64, usize, usize) {
        let t0 = Instant::now();
        self.send("turn.start", &json!({"session_id": sid, "prompt": prompt}));
        let (mut deltas, mut bytes) = (0, 0);
        loop {
            let v = self.next();
            match v["event"].as_str() {
                Some("message.delta") => {
                    deltas += 1;
                    bytes += v["data"]["text"].as_str().map_or(0, str::len);
                }
                Some("run.finished") => {
                    assert_eq!(v["data"]["outcome"], "completed", "{v}");
                    return (t0.elapsed().as_secs_f64() * 1e3, deltas, bytes);
                }
                _ => {}
            }
        }
    }
}

/// Writes a history of `turns` completed echo turns.
fn write_history(home: &Path, cwd: &Path, id: &str, turns: usize) {
    use std::fmt::Write as _;
    let ts = "2026-12-01T08:00:00Z";
    let cwd = std::fs::canonicalize(cwd).unwrap();
    let mut body = format!(
        "{}\n",
        json!({"type":"session_meta","session_id":id,"ts":ts,"cwd":cwd})
    );
    for t in 0..turns {
        let text = format!("echo turn number {t} with a few words in it");
        let _ = writeln!(
            body,
            "{}",
            json!({"type":"user_input","session_id":id,"ts":ts,"run_id":format!("r{t}"),"message_id":format!("u{t}"),"text":text})
        );
        let _ = writeln!(
            body,
            "{}",
            json!({"type":"assistant_message","session_id":id,"ts":ts,"run_id":format!("r{t}"),"message_id":format!("a{t}"),"text":text})
        );
        let _ = writeln!(
            body,
            "{}",
            json!({"type":"run_finished","session_id":id,"ts":ts,"run_id":format!("r{t}"),"outcome":"completed"})
        );
    }
    std::fs::write(home.join("sessions").join(format!("{id}.jsonl")), body).unwrap();
}

/// Median echo turn (ms) over `n` turns, in a fresh session or one holding `prior` turns.
fn echo_turns(prior: usize, n: usize) -> f64 {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("sessions")).unwrap();
    let mut c = Child::start(home.path(), cwd.path());
    let sid = if prior == 0 {
        let r = c.call("session.create", &json!({}));
        r["result"]["session_id"].as_str().unwrap().to_owned()
    } else {
        write_history(home.path(), cwd.path(), "big", prior);
        let r = c.call("session.open", &json!({"session_id": "big"}));
        assert!(r.get("result").is_some(), "{r}");
        "big".to_owned()
    };
    let mut ms: Vec<f64> = (0..n)
        .map(|i| c.turn(&sid, &format!("hello number {i}")).0)
        .collect();
    c.finish();
    median(&mut ms)
}

/// Median ms of one fsync'd append of a 200-byte line on the disk the sessions live on.
fn fsync_floor(n: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("a.jsonl"))
        .unwrap();
    let line = format!("{}\n", "x".repeat(199));
    let mut ms: Vec<f64> = (0..n)
        .map(|_| {
            let t0 = Instant::now();
            f.write_all(line.as_bytes()).unwrap();
            f.sync_data().unwrap();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&mut ms)
}

/// A Chat Completions SSE body of `n` one-word deltas.
fn chat_stream(n: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{"content":format!("w{i} ")},"finish_reason":null}]})
        ));
    }
    s.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})
    ));
    s.into_bytes()
}

/// Serves `body` (as SSE, in `pieces` flushed chunks `pause` apart) to `conns` connections.
fn sse_server(body: Vec<u8>, pieces: usize, pause: Duration, conns: usize) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((s, _)) = l.accept() else { return };
            let body = body.clone();
            std::thread::spawn(move || serve_sse(s, &body, pieces, pause));
        }
    });
    base
}

fn serve_sse(s: TcpStream, body: &[u8], pieces: usize, pause: Duration) {
    // The request is read only to be answered; its body does not matter.
    drop(read_body(&s));
    let mut w = s;
    let _ = w.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
    );
    let step = body.len().div_ceil(pieces.max(1));
    for c in body.chunks(step.max(1)) {
        if w.write_all(c).and_then(|()| w.flush()).is_err() {
            return;
        }
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
}

/// The floor: `<bench> mc-floor sse URL` (`support/floor.rs`), a process that reads the same SSE and writes one line per
/// event; its stdout is read and parsed here exactly as the binary's is. Returns events/s.
fn floor_stream(base: &str, events: usize) -> f64 {
    let t0 = Instant::now();
    let mut child = floor::command()
        .args(["sse", base])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the floor");
    let mut frames = Frames::new(child.stdout.take().unwrap());
    let (mut n, mut bytes) = (0usize, 0usize);
    while let Some(Ok(v)) = frames.next_frame() {
        match v["event"].as_str() {
            Some("message.delta") => {
                n += 1;
                bytes += v["data"]["text"].as_str().map_or(0, str::len);
            }
            Some("run.finished") => break,
            _ => {}
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = child.wait();
    assert!(n >= events && bytes > 0, "floor saw {n} events");
    events as f64 / secs
}

fn provider_env(base: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let settings = json!({
        "provider": "local", "model": "bench",
        "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{base}/v1")}},
    });
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    (home, cwd)
}

/// Deltas/s through the binary: one turn of `events` deltas. Deltas may coalesce under
/// pressure, so what counts is the SSE deltas whose text reached stdout in delta frames per
/// second of the turn (delivered text / mean delta text), beside the frame count.
fn binary_stream(events: usize) -> (f64, usize) {
    let base = sse_server(chat_stream(events), 64, Duration::ZERO, 1);
    let (home, cwd) = provider_env(&base);
    let mut c = Child::start(home.path(), cwd.path());
    let sid = c.call("session.create", &json!({}))["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (ms, frames, bytes) = c.turn(&sid, "stream please");
    c.finish();
    let text: usize = (0..events).map(|i| format!("w{i} ").len()).sum();
    let delivered = events as f64 * bytes as f64 / text as f64;
    eprintln!(
        "stream: {events} events in {ms:.1} ms, {frames} delta frames, {bytes} of {text} text bytes delivered"
    );
    (delivered / (ms / 1e3), frames)
}

/// `status` round trips (ms) while a paced stream runs.
fn status_during_stream(samples: usize) -> Vec<f64> {
    let base = sse_server(chat_stream(4_000), 400, Duration::from_millis(5), 1);
    let (home, cwd) = provider_env(&base);
    let mut c = Child::start(home.path(), cwd.path());
    let sid = c.call("session.create", &json!({}))["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    c.send("turn.start", &json!({"session_id": sid, "prompt": "go"}));
    let mut rtt = Vec::new();
    let mut finished = false;
    while rtt.len() < samples && !finished {
        let t0 = Instant::now();
        let id = c.send("status", &json!({}));
        loop {
            let v = c.next();
            if v["id"] == id.as_str() {
                rtt.push(t0.elapsed().as_secs_f64() * 1e3);
                break;
            }
            if v["event"] == "run.finished" {
                finished = true;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    while !finished {
        finished = c.next()["event"] == "run.finished";
    }
    c.finish();
    rtt
}

fn main() {
    floor::serve_if_asked();
    let quick = std::env::var_os("MC_BENCH_QUICK").is_some();
    let (prior, turns) = if quick { (500, 20) } else { (4_000, 50) };
    let fresh = echo_turns(0, turns);
    let long = echo_turns(prior, turns);
    let fsync = fsync_floor(if quick { 50 } else { 200 });
    let events = if quick { 5_000 } else { 20_000 };
    let rounds = if quick { 1 } else { 3 };
    let mut bin = Vec::new();
    let mut floor = Vec::new();
    let mut got = 0;
    for _ in 0..rounds {
        let (r, d) = binary_stream(events);
        bin.push(r);
        got = d;
        let base = sse_server(chat_stream(events), 64, Duration::ZERO, 1);
        floor.push(floor_stream(&base, events));
    }
    let (b, f) = (median(&mut bin), median(&mut floor));
    let mut rtt = status_during_stream(if quick { 100 } else { 300 });
    let p99 = pct(&mut rtt, 0.99);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!();
    println!("| measure | magi-code | floor | target | verdict |");
    println!("| --- | ---: | ---: | --- | --- |");
    println!(
        "| echo turn, median of {turns}: fresh session / after {prior} turns | {fresh:.2} ms / {long:.2} ms | – | second ≤ 1.5× first | {} |",
        verdict(long <= 1.5 * fresh)
    );
    println!(
        "| echo turn median beside one fsync'd append (the turn does two) | {fresh:.2} ms | {fsync:.2} ms | – | – |"
    );
    println!(
        "| deltas/s, loopback SSE → delta frames on stdout ({events} events coalesced into {got} frames), median of {rounds} | {b:.0} | {f:.0} | ≥ 0.5× floor | {:.0}% {} |",
        100.0 * b / f,
        verdict(b >= 0.5 * f)
    );
    println!(
        "| status round trip while streaming, p99 of {} | {p99:.2} ms | – | < 2 ms | {} |",
        rtt.len(),
        verdict(p99 < 2.0)
    );
}
