//! Code Mode speed through the real backend (`code-mode.md` 7): prints one table.
//!
//! The `serve --stdio` binary talks to a loopback Chat Completions model that answers from the
//! turn's prompt, so every turn has the same shape: step 1 the model makes its call(s), step 2
//! (after the results) it says `ok`. A turn is timed from `turn.start` to `run.finished`.
//! Each Code Mode turn is set beside a floor turn of the same shape that calls `read_file`
//! directly instead, so HTTP, history appends and the loop's own work cancel out:
//!
//! 1. first `exec` of a session, helper start included: the first turn of a fresh session
//!    calling `exec` with `return 1`, less the first turn of another fresh session calling
//!    `read_file` once (target ≤ 20 ms);
//! 2. a later cell that makes no call: a later `exec` `return 1` turn of the same session,
//!    less a later turn calling `read_file` once (target ≤ 2 ms);
//! 3. each nested call: the marginal cost of a nested call less that of a direct one,
//!    `(nested50 − empty) / 50 − (direct50 − direct1) / 49`, where `nested50` is a cell
//!    awaiting 50 `read_file` calls one after another (distinct paths, so the runaway rule
//!    does not refuse them), `empty` the later `return 1` cell, `direct50` one model step
//!    making the same 50 calls and `direct1` the one-call floor turn (target ≤ 0.3 ms);
//! 4. the helper's peak resident memory (`VmHWM` of the `code-host` child) after its start
//!    and two `return 1` cells, beside the peak of the same executable run for `--version`
//!    (the cost of the executable itself; section 7 sets no target).
//!
//! The direct floor pays what nested calls skip: its second request carries the 50 results
//! (the cell keeps them), and its 50 calls run on scoped threads as the runner runs any
//! batch of read-class calls, where the cell awaits them one by one. So row 3 is the
//! difference a model sees between the two ways, not the helper's wire cost alone
//! (`code_host.rs` measures that).
//!
//! Every figure is a median over rounds; each round runs one fresh session of all the Code
//! Mode turns and the floors interleaved with them, and one fresh session for the first-turn
//! floor. Each turn's completed activities are counted, so a refused call fails the bench.
//! Each series' spread goes to stderr, with the backend's own `VmHWM` per round. State lives
//! on tmpfs (`MC_BENCH_DISK=1`: on disk).
//!
//! Run: `cargo bench -p magi-code --bench code_mode` (`MC_BENCH_QUICK=1` for a short run).

#[path = "support/child.rs"]
mod child;

use child::procs::helpers;
use child::{median, read_body, vm_hwm_kib, Child, SERVER};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

/// Words of the runner's fixed title instruction (`runner.md` 7): such requests get a 500.
const TITLE_MARK: &str = "short title for the conversation";
/// Nested and direct calls in the per-call measure.
const CALLS: usize = 50;

/// Min, quartiles and max of `v`, and its first and last five, for stderr.
fn spread(v: &[f64]) -> String {
    let mut w = v.to_vec();
    w.sort_by(f64::total_cmp);
    let q = |p: f64| w[((w.len() - 1) as f64 * p).round() as usize];
    format!(
        "min {:.2} q1 {:.2} med {:.2} q3 {:.2} max {:.2}; first {:.1?} last {:.1?}",
        q(0.0),
        q(0.25),
        q(0.5),
        q(0.75),
        q(1.0),
        &v[..5.min(v.len())],
        &v[v.len().saturating_sub(5)..]
    )
}

/// A loopback Chat Completions model. The prompt says what step 1 does: `exec:CODE` calls
/// `exec` with CODE, `direct:N` calls `read_file` on `f0`..`f{N-1}` in one step; once the
/// last message is a tool result it answers `ok`.
fn model_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || answer(s));
        }
    });
    base
}

fn answer(s: TcpStream) {
    let Some(req) = read_body(&s) else {
        return;
    };
    let body: Value = serde_json::from_slice(&req).unwrap_or(Value::Null);
    let mut w = s;
    let Some(sse) = reply(&body) else {
        let _ = w.write_all(
            b"HTTP/1.1 500 X\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
        );
        return;
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        sse.len()
    );
    let _ = w
        .write_all(head.as_bytes())
        .and_then(|()| w.write_all(sse.as_bytes()))
        .and_then(|()| w.flush());
}

fn chunk(delta: &Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

/// The SSE reply to one request, or `None` for a 500 (a title request, or one not understood).
fn reply(body: &Value) -> Option<String> {
    if body.to_string().contains(TITLE_MARK) {
        return None;
    }
    let last = body["messages"].as_array()?.last()?;
    if last["role"] == "tool" {
        return Some(format!(
            "{}{}data: [DONE]\n\n",
            chunk(&json!({"content": "ok"}), None),
            chunk(&json!({}), Some("stop"))
        ));
    }
    let prompt = match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => return None,
    };
    let calls: Vec<Value> = if let Some(code) = prompt.strip_prefix("exec:") {
        vec![json!({"index": 0, "id": "x0", "type": "function",
                    "function": {"name": "exec", "arguments": json!({"code": code}).to_string()}})]
    } else {
        let n: usize = prompt.strip_prefix("direct:")?.parse().ok()?;
        (0..n)
            .map(|i| {
                json!({"index": i, "id": format!("d{i}"), "type": "function",
                       "function": {"name": "read_file",
                                    "arguments": json!({"path": format!("f{i}")}).to_string()}})
            })
            .collect()
    };
    Some(format!(
        "{}{}data: [DONE]\n\n",
        chunk(&json!({"tool_calls": calls}), None),
        chunk(&json!({}), Some("tool_calls"))
    ))
}

impl Child {
    /// One turn: ms from `turn.start` to `run.finished`; it must complete with exactly
    /// `activities` completed activities (the top-level call(s) and nested ones).
    fn turn(&mut self, sid: &str, prompt: &str, activities: usize) -> f64 {
        let t0 = Instant::now();
        self.send("turn.start", &json!({"session_id": sid, "prompt": prompt}));
        let mut done = 0;
        loop {
            let v = self.next();
            match v["event"].as_str() {
                Some("activity") if v["data"]["state"] == "completed" => done += 1,
                Some("run.finished") => {
                    let ms = t0.elapsed().as_secs_f64() * 1e3;
                    assert_eq!(v["data"]["outcome"], "completed", "{v}");
                    assert_eq!(done, activities, "{prompt}: completed activities");
                    return ms;
                }
                _ => {}
            }
        }
    }
}

/// Peak RSS (KiB) of `magi-code --version`: the executable's own floor, the helper being the
/// same executable. Reaped with `wait4` for its `ru_maxrss` (std has no safe way to it).
#[allow(unsafe_code)]
fn version_maxrss_kib() -> f64 {
    let child = std::process::Command::new(SERVER)
        .arg("--version")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn --version");
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: a zeroed `rusage` is valid, and both pointers outlive the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; `child` is forgotten after, so it is reaped once.
    let got = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
    assert_eq!(got, pid, "wait4");
    // Reaped above: dropping `Child` leaves nothing behind.
    std::mem::forget(child);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    usage.ru_maxrss as f64
}

/// Every measured series (ms, KiB), one sample (or two) per round.
#[derive(Default)]
struct Samples {
    first_exec: Vec<f64>,
    first_direct: Vec<f64>,
    later_exec: Vec<f64>,
    later_direct: Vec<f64>,
    nested: Vec<f64>,
    direct_many: Vec<f64>,
    helper_hwm: Vec<f64>,
    backend_hwm: Vec<f64>,
    version_rss: Vec<f64>,
}

/// One round: a fresh session of Code Mode turns with their floors between them, then a
/// fresh session whose first turn is the first-turn floor.
fn round(c: &mut Child, s: &mut Samples) {
    let nested = format!(
        "exec:for (let i = 0; i < {CALLS}; i++) await tools.read_file({{path: \"f\" + i}}); return 1"
    );
    let many = format!("direct:{CALLS}");
    let sid = c.session();
    s.first_exec.push(c.turn(&sid, "exec:return 1", 1));
    s.later_direct.push(c.turn(&sid, "direct:1", 1));
    s.later_exec.push(c.turn(&sid, "exec:return 1", 1));
    let pid = c.server.child.id();
    let [helper] = helpers(pid)[..] else {
        panic!("not one code-host child of {pid}")
    };
    s.helper_hwm.push(vm_hwm_kib(helper));
    s.backend_hwm.push(vm_hwm_kib(pid));
    s.version_rss.push(version_maxrss_kib());
    s.nested.push(c.turn(&sid, &nested, CALLS + 1));
    s.direct_many.push(c.turn(&sid, &many, CALLS));
    s.later_exec.push(c.turn(&sid, "exec:return 1", 1));
    s.later_direct.push(c.turn(&sid, "direct:1", 1));
    let floor = c.session();
    s.first_direct.push(c.turn(&floor, "direct:1", 1));
}

fn main() {
    let quick = std::env::var_os("MC_BENCH_QUICK").is_some();
    let rounds = if quick { 8 } else { 200 };
    let base = model_server();
    // Both sides pay the same fsync'd history appends; on a shared disk their latency swamps
    // the differences measured here, so the state lives on tmpfs unless told otherwise.
    let shm = Path::new("/dev/shm");
    let disk = std::env::var_os("MC_BENCH_DISK").is_some() || !shm.is_dir();
    let tmp = || {
        if disk {
            tempfile::tempdir()
        } else {
            tempfile::tempdir_in(shm)
        }
        .unwrap()
    };
    let (home, cwd) = (tmp(), tmp());
    let settings = json!({
        "provider": "local", "model": "bench",
        "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{base}/v1")}},
        "code_mode": {"enabled": true},
    });
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    for i in 0..CALLS {
        std::fs::write(cwd.path().join(format!("f{i}")), format!("line {i}\n")).unwrap();
    }
    let mut c = Child::start(home.path(), cwd.path());
    let mut s = Samples::default();
    // One unmeasured round warms the page cache and the allocator.
    round(&mut c, &mut Samples::default());
    for _ in 0..rounds {
        round(&mut c, &mut s);
    }
    c.finish();
    for (name, v) in [
        ("first exec", &s.first_exec),
        ("first direct", &s.first_direct),
        ("later exec", &s.later_exec),
        ("later direct", &s.later_direct),
        ("nested", &s.nested),
        ("direct many", &s.direct_many),
        ("helper VmHWM KiB", &s.helper_hwm),
        ("backend VmHWM KiB", &s.backend_hwm),
        ("--version maxrss KiB", &s.version_rss),
    ] {
        eprintln!("{name}: {}", spread(v));
    }
    let first = median(&mut s.first_exec);
    let first_floor = median(&mut s.first_direct);
    let later = median(&mut s.later_exec);
    let later_floor = median(&mut s.later_direct);
    let nested = median(&mut s.nested);
    let many = median(&mut s.direct_many);
    let per_nested = (nested - later) / CALLS as f64;
    let per_direct = (many - later_floor) / (CALLS - 1) as f64;
    let helper = median(&mut s.helper_hwm) / 1024.0;
    let version = median(&mut s.version_rss) / 1024.0;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!();
    let on = if disk { "disk" } else { "tmpfs" };
    println!("| measure (median of {rounds} rounds, state on {on}) | Code Mode | floor | difference | target | verdict |");
    println!("| --- | ---: | ---: | ---: | --- | --- |");
    println!(
        "| first `exec` of a session (`return 1`, helper start included) vs first direct `read_file` turn | {first:.2} ms | {first_floor:.2} ms | {:.2} ms | ≤ 20 ms | {} |",
        first - first_floor,
        verdict(first - first_floor <= 20.0)
    );
    println!(
        "| later cell, no call (`return 1`) vs later direct `read_file` turn | {later:.2} ms | {later_floor:.2} ms | {:.2} ms | ≤ 2 ms | {} |",
        later - later_floor,
        verdict(later - later_floor <= 2.0)
    );
    println!(
        "| per call: {CALLS} nested `read_file` ({nested:.2} ms turn) vs {CALLS} direct in one step ({many:.2} ms turn) | {per_nested:.3} ms | {per_direct:.3} ms | {:.3} ms | ≤ 0.3 ms | {} |",
        per_nested - per_direct,
        verdict(per_nested - per_direct <= 0.3)
    );
    println!(
        "| peak RSS of the helper (VmHWM) after two `return 1` cells vs `magi-code --version` (ru_maxrss) | {helper:.1} MiB | {version:.1} MiB | {:.1} MiB | none in 7 | – |",
        helper - version
    );
}
