//! Transport benchmark: prints one table.
//!
//! - spawn → `initialize` response latency (median of many spawns), with the floor's
//!   spawn → first response beside it; the same for `magi-code acp`'s ACP `initialize`, and
//!   its `session/new` (a backend child started) after it;
//! - pipelined `status` round trips per second over real pipes, against the floor program
//!   (`support/floor.rs`, this executable run as `mc-floor`: read a line, parse it with serde_json, write a fixed response);
//! - peak resident memory while fed 1 GiB of malformed lines, and while fed an oversize line.
//!
//! Run: `cargo bench -p magi-code --bench transport` (set `MC_BENCH_QUICK=1` for a short run).

#[path = "support/floor.rs"]
mod floor;

use magi_code::client::pipe as client;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::Instant;

const SERVER: &str = env!("CARGO_BIN_EXE_magi-code");
/// The floor, spawned as this executable (`support/floor.rs`).
const FLOOR: &str = floor::ARG;

fn req(id: &str, method: &str, params: &str) -> String {
    let params: serde_json::Value = serde_json::from_str(params).expect("bench params");
    client::request(id, method, &params) + "\n"
}

fn spawn(bin: &str, home: &std::path::Path) -> Child {
    let mut c = if bin == SERVER {
        client::serve_command(std::path::Path::new(bin))
    } else {
        let mut c = floor::command();
        c.stdin(Stdio::piped()).stdout(Stdio::piped());
        c
    };
    c.env("MC_HOME", home)
        .current_dir(home)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Spawn → first response line, in ms.
fn startup(bin: &str, runs: usize) -> Vec<f64> {
    let init = req(
        "r1",
        "initialize",
        r#"{"required_capabilities":["status","shutdown"]}"#,
    );
    (0..runs)
        .map(|_| {
            let home = tempfile::tempdir().unwrap();
            let t0 = Instant::now();
            let mut child = spawn(bin, home.path());
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(init.as_bytes()).unwrap();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            assert!(
                line.contains("\"id\":\"r1\"") || bin == FLOOR,
                "initialize answered"
            );
            drop(stdin);
            let _ = child.wait();
            ms
        })
        .collect()
}

/// `magi-code acp`: spawn → its `initialize` answer, then → its `session/new` answer (a
/// backend child started, initialized, a session created), in ms.
fn acp_startup(runs: usize) -> (Vec<f64>, Vec<f64>) {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
    (0..runs)
        .map(|_| {
            let home = tempfile::tempdir().unwrap();
            let t0 = Instant::now();
            let mut child = std::process::Command::new(SERVER)
                .arg("acp")
                .env("MC_HOME", home.path())
                .current_dir(home.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn acp");
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, "{init}").unwrap();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let init_ms = t0.elapsed().as_secs_f64() * 1e3;
            assert!(
                line.contains("\"protocolVersion\":1"),
                "acp initialize answered"
            );
            let new = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": home.path(), "mcpServers": []}});
            let t1 = Instant::now();
            writeln!(stdin, "{new}").unwrap();
            line.clear();
            out.read_line(&mut line).unwrap();
            let new_ms = t1.elapsed().as_secs_f64() * 1e3;
            assert!(line.contains("sessionId"), "session/new answered: {line}");
            drop(stdin);
            let _ = child.wait();
            (init_ms, new_ms)
        })
        .unzip()
}

/// Round trips per second for `n` pipelined requests after initialize.
fn throughput(bin: &str, n: usize) -> f64 {
    let home = tempfile::tempdir().unwrap();
    let mut child = spawn(bin, home.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::with_capacity(1 << 16, child.stdout.take().unwrap());
    stdin
        .write_all(req("init", "initialize", r#"{"required_capabilities":[]}"#).as_bytes())
        .unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let batch: String = (0..n)
        .map(|i| req(&format!("s{i}"), "status", "{}"))
        .collect();
    let t0 = Instant::now();
    let writer = std::thread::spawn(move || {
        stdin.write_all(batch.as_bytes()).unwrap();
        stdin
    });
    let mut got = 0;
    let mut buf = Vec::new();
    while got < n {
        buf.clear();
        if out.read_until(b'\n', &mut buf).unwrap() == 0 {
            break;
        }
        got += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(got, n, "every request answered");
    drop(writer.join().unwrap());
    let _ = child.wait();
    n as f64 / secs
}

/// Peak resident set of a live process since its exec, from /proc (KiB).
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Waits for `child` and returns its exit code and peak resident set (KiB) from `wait4`.
fn wait_rusage(child: Child) -> (i32, u64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data filled by the kernel; the pid is our own child, not yet reaped.
    #[allow(unsafe_code)]
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut ru);
        ru
    };
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, ru.ru_maxrss as u64)
}

/// Feeds `total` bytes of malformed lines (responses read concurrently); returns the peak RSS
/// (VmHWM, KiB) and the time taken.
fn malformed_memory(total: usize) -> (u64, f64, usize) {
    let home = tempfile::tempdir().unwrap();
    let mut child = spawn(SERVER, home.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut out = child.stdout.take().unwrap();
    stdin
        .write_all(req("init", "initialize", r#"{"required_capabilities":[]}"#).as_bytes())
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut lines = 0usize;
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            lines += buf[..n].iter().filter(|b| **b == b'\n').count();
        }
        lines
    });
    // Four kinds of 65,000-byte lines, each within the frame bound: broken JSON, invalid
    // UTF-8, nesting over 32, and a valid non-object.
    let mut kinds: Vec<Vec<u8>> = Vec::new();
    let mut broken = b"{\"protocol\":\"".to_vec();
    broken.resize(65_000, b'a');
    kinds.push(broken);
    let mut utf = vec![b'x'; 65_000];
    utf[100] = 0xff;
    kinds.push(utf);
    let mut deep = vec![b'['; 40];
    deep.resize(65_000, b' ');
    kinds.push(deep);
    let mut arr = b"[\"".to_vec();
    arr.resize(64_998, b'z');
    arr.extend_from_slice(b"\"]");
    kinds.push(arr);
    for k in &mut kinds {
        k.push(b'\n');
    }
    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut lines = 0usize;
    while sent < total {
        let k = &kinds[lines % kinds.len()];
        stdin.write_all(k).unwrap();
        sent += k.len();
        lines += 1;
    }
    stdin
        .write_all(req("bye", "shutdown", "{}").as_bytes())
        .unwrap();
    drop(stdin);
    let answered = reader.join().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let (code, peak) = wait_rusage(child);
    assert_eq!(code, 0, "clean shutdown");
    assert!(answered > lines, "every malformed line answered");
    (peak, secs, lines)
}

/// Feeds one oversize line of `total` bytes; returns the peak RSS seen (KiB) and exit code.
fn oversize_memory(total: usize) -> (u64, i32, usize) {
    let home = tempfile::tempdir().unwrap();
    let mut child = spawn(SERVER, home.path());
    let mut stdin = child.stdin.take().unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let mut sent = 0;
    while sent < total {
        if stdin.write_all(&chunk).is_err() {
            break; // The child closed after byte 65,537, as it must.
        }
        sent += chunk.len();
    }
    drop(stdin);
    let (code, peak) = wait_rusage(child);
    (peak, code, sent)
}

/// A line-oriented client of one child.
struct Client {
    child: Child,
    stdin: std::process::ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Client {
    fn start(home: &std::path::Path, cwd: &std::path::Path, caps: &str) -> Self {
        let mut child = client::serve_command(std::path::Path::new(SERVER))
            .env("MC_HOME", home)
            .current_dir(cwd)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::with_capacity(1 << 16, child.stdout.take().unwrap());
        let mut c = Self {
            child,
            stdin,
            out,
            next: 0,
        };
        c.call(
            "initialize",
            &format!(r#"{{"required_capabilities":[{caps}]}}"#),
        );
        c
    }

    fn call(&mut self, method: &str, params: &str) -> serde_json::Value {
        self.next += 1;
        let id = format!("q{}", self.next);
        self.stdin
            .write_all(req(&id, method, params).as_bytes())
            .unwrap();
        loop {
            let mut line = String::new();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "child closed");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id.as_str() {
                return v;
            }
        }
    }

    fn finish(mut self) -> (i32, u64) {
        self.call("shutdown", "{}");
        drop(self.stdin);
        wait_rusage(self.child)
    }
}

fn write_session(dir: &std::path::Path, id: &str, cwd: &str, body: &str) {
    let meta = format!(
        r#"{{"type":"session_meta","session_id":"{id}","ts":"2026-11-30T12:00:00Z","cwd":"{cwd}"}}"#
    );
    std::fs::write(dir.join(format!("{id}.jsonl")), format!("{meta}\n{body}")).unwrap();
}

/// A history at the stored-read budget: 64 MiB in about 100,000 lines, whose projection fits
/// the 8 MiB / 10,000-part snapshot (streamed chunks superseded by short reconciled replies).
fn big_history(dir: &std::path::Path, id: &str, cwd: &str) -> (u64, usize) {
    use std::fmt::Write as _;
    let turns = 4_300;
    let chunks = 20;
    let target: usize = (64 << 20) - (256 << 10);
    let per_turn = target / turns;
    let chunk_text = "x".repeat((per_turn - 1_600) / chunks - 135);
    let reply = "y".repeat(900);
    let mut body = String::with_capacity(target + (1 << 20));
    let ts = "2026-11-30T12:00:00Z";
    for t in 0..turns {
        let _ = writeln!(
            body,
            r#"{{"type":"user_input","session_id":"{id}","ts":"{ts}","run_id":"r{t}","text":"question number {t} {}"}}"#,
            "q".repeat(120)
        );
        for c in 0..chunks {
            let _ = writeln!(
                body,
                r#"{{"type":"assistant_chunk","session_id":"{id}","ts":"{ts}","run_id":"r{t}","message_id":"a{t}","part":{c},"text":"{chunk_text}"}}"#
            );
        }
        let _ = writeln!(
            body,
            r#"{{"type":"assistant_message","session_id":"{id}","ts":"{ts}","run_id":"r{t}","message_id":"a{t}","text":"{reply}"}}"#
        );
        let _ = writeln!(
            body,
            r#"{{"type":"run_finished","session_id":"{id}","ts":"{ts}","run_id":"r{t}","outcome":"completed"}}"#
        );
    }
    write_session(dir, id, cwd, &body);
    let bytes = std::fs::metadata(dir.join(format!("{id}.jsonl")))
        .unwrap()
        .len();
    (bytes, body.lines().count() + 1)
}

struct SessionFigures {
    open_page_ms: f64,
    open_rss_kib: u64,
    history_bytes: u64,
    history_lines: usize,
    list_ms: f64,
    discover_pages: usize,
    discover_files: usize,
    discover_max_ms: f64,
    discover_median_ms: f64,
}

fn session_bench(quick: bool) -> SessionFigures {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let cwd_real = std::fs::canonicalize(cwd.path()).unwrap();
    let cwd_s = cwd_real.to_str().unwrap().to_owned();
    let sessions = home.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let (history_bytes, history_lines) = big_history(&sessions, "big", &cwd_s);
    // Open + first page, in a child of its own so its peak RSS is the history work's.
    let mut c = Client::start(home.path(), &cwd_real, "");
    let t0 = Instant::now();
    let open = c.call("session.open", r#"{"session_id":"big"}"#);
    let rev = open["result"]["revision"]
        .as_str()
        .unwrap_or_else(|| panic!("open failed: {open}"))
        .to_owned();
    let page = c.call(
        "history.page",
        &format!(r#"{{"session_id":"big","revision":"{rev}","cursor":null}}"#),
    );
    let open_page_ms = t0.elapsed().as_secs_f64() * 1e3;
    assert!(
        page["result"]["entries"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "first page"
    );
    // VmHWM of the live child: its own peak since exec (wait4's maxrss would also count the
    // spawning benchmark's pages, which the child shared until exec).
    let open_rss_kib = vm_hwm_kib(c.child.id());
    let _ = c.finish();
    std::fs::remove_file(sessions.join("big.jsonl")).unwrap();

    // session.list over 256 small sessions.
    for i in 0..256 {
        let id = format!("s{i:05}");
        let body = format!(
            "{{\"type\":\"title\",\"session_id\":\"{id}\",\"ts\":\"2026-11-30T12:00:00Z\",\"title\":\"Session {i}\"}}\n"
        );
        write_session(&sessions, &id, &cwd_s, &body);
    }
    let mut c = Client::start(home.path(), &cwd_real, r#""session.discover""#);
    let mut list_times = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let l = c.call("session.list", r#"{"limit":100}"#);
        list_times.push(t0.elapsed().as_secs_f64() * 1e3);
        assert!(l["result"]["sessions"].as_array().is_some(), "listed");
    }
    // session.discover paging through many session files.
    let files = if quick { 10_000 } else { 100_000 };
    for i in 256..files {
        write_session(&sessions, &format!("s{i:06}"), &cwd_s, "");
    }
    let mut cursor = "null".to_owned();
    let mut page_ms = Vec::new();
    let mut seen = 0;
    loop {
        let t0 = Instant::now();
        let d = c.call(
            "session.discover",
            &format!(r#"{{"cursor":{cursor},"limit":100}}"#),
        );
        page_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        let r = &d["result"];
        seen += r["sessions"].as_array().expect("discover page").len();
        if r["complete"] == true {
            break;
        }
        cursor = r["next_cursor"].to_string();
    }
    assert_eq!(seen, files, "every session discovered");
    let _ = c.finish();
    let discover_pages = page_ms.len();
    SessionFigures {
        open_page_ms,
        open_rss_kib,
        history_bytes,
        history_lines,
        list_ms: median(&mut list_times),
        discover_pages,
        discover_files: files,
        discover_max_ms: pct(&mut page_ms, 1.0),
        discover_median_ms: median(&mut page_ms),
    }
}

fn main() {
    floor::serve_if_asked();
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing useful either.
    let quick = std::env::var_os("MC_BENCH_QUICK").is_some();
    let spawns = if quick { 10 } else { 60 };
    let rounds = if quick { 3 } else { 11 };
    let n = 4_000; // stays under the 4,096 request IDs of one child

    let mut s_server = startup(SERVER, spawns);
    let mut s_floor = startup(FLOOR, spawns);
    let (mut acp_init, mut acp_new) = acp_startup(spawns);
    let mut t_server: Vec<f64> = Vec::new();
    let mut t_floor: Vec<f64> = Vec::new();
    // Interleave so both see the same machine conditions.
    for _ in 0..rounds {
        t_server.push(throughput(SERVER, n));
        t_floor.push(throughput(FLOOR, n));
    }
    let total = if quick { 64 << 20 } else { 1 << 30 };
    let (rss_malformed, secs, lines) = malformed_memory(total);
    let (rss_oversize, code, accepted) = oversize_memory(if quick { 64 << 20 } else { 1 << 30 });

    let sf = session_bench(quick);

    let ms = median(&mut s_server);
    let floor_ms = median(&mut s_floor);
    let tp = median(&mut t_server);
    let tpf = median(&mut t_floor);
    println!();
    println!("| measure | magi-code | floor | target | verdict |");
    println!("| --- | ---: | ---: | --- | --- |");
    println!(
        "| spawn → initialize response, median of {spawns} (p90) | {ms:.2} ms ({:.2}) | {floor_ms:.2} ms ({:.2}) | < 10 ms | {} |",
        pct(&mut s_server, 0.9),
        pct(&mut s_floor, 0.9),
        if ms < 10.0 { "met" } else { "MISSED" }
    );
    let acp_ms = median(&mut acp_init);
    println!(
        "| `acp`: spawn → ACP initialize answer, median of {spawns} (p90) | {acp_ms:.2} ms ({:.2}) | {floor_ms:.2} ms | < 10 ms | {} |",
        pct(&mut acp_init, 0.9),
        if acp_ms < 10.0 { "met" } else { "MISSED" }
    );
    let new_ms = median(&mut acp_new);
    println!(
        "| `acp`: then session/new (a serve child started and initialized, a session created), median (p90) | {new_ms:.2} ms ({:.2}) | – | < 100 ms | {} |",
        pct(&mut acp_new, 0.9),
        if new_ms < 100.0 { "met" } else { "MISSED" }
    );
    println!(
        "| pipelined status round trips/s, {n} per child, median of {rounds} | {tp:.0} | {tpf:.0} | ≥ 70% of floor | {:.0}% {} |",
        100.0 * tp / tpf,
        if tp >= 0.7 * tpf { "met" } else { "MISSED" }
    );
    println!(
        "| peak RSS fed {} MiB of malformed lines ({lines} lines, {:.0} MiB/s) | {:.1} MiB | – | < 16 MiB | {} |",
        total >> 20,
        (total >> 20) as f64 / secs,
        rss_malformed as f64 / 1024.0,
        if rss_malformed < 16 * 1024 { "met" } else { "MISSED" }
    );
    println!(
        "| peak RSS offered one {} MiB oversize line ({} MiB accepted by the pipe before exit {code}) | {:.1} MiB | – | < 16 MiB | {} |",
        total >> 20,
        accepted >> 20,
        rss_oversize as f64 / 1024.0,
        if rss_oversize < 16 * 1024 && code == 1 {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "| session.open + first history.page, {:.1} MiB / {} lines | {:.0} ms | – | < 400 ms | {} |",
        sf.history_bytes as f64 / 1048576.0,
        sf.history_lines,
        sf.open_page_ms,
        if sf.open_page_ms < 400.0 { "met" } else { "MISSED" }
    );
    println!(
        "| peak RSS of that child (whole process) | {:.1} MiB | – | < 24 MiB (3 × 8 MiB) | {} |",
        sf.open_rss_kib as f64 / 1024.0,
        if sf.open_rss_kib < 24 * 1024 {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "| session.list of 256 sessions, median of 5 | {:.1} ms | – | < 100 ms | {} |",
        sf.list_ms,
        if sf.list_ms < 100.0 { "met" } else { "MISSED" }
    );
    println!(
        "| session.discover through {} files: {} pages, median (max) per page | {:.1} ms ({:.1}) | – | each < 2,000 ms | {} |",
        sf.discover_files,
        sf.discover_pages,
        sf.discover_median_ms,
        sf.discover_max_ms,
        if sf.discover_max_ms < 2000.0 { "met" } else { "MISSED" }
    );
}
