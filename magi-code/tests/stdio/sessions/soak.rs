//! Soak (issue 24): 1,000 turns of 20 tool calls each through the offline provider, each call
//! a 60 KB tool result, so the history grows to about 1.2 GB, far past every bound. Every 100
//! turns a fresh child lists the session, opens it, pages to the end and runs one more turn.
//!
//! Long (minutes, and about 1.3 GB of disk): outside the default run. Run it with
//! `cargo test --release -p magi-code --test stdio -- --ignored soak`; `MC_SOAK_TURNS` sets
//! the number of turns (default 1,000), `MC_SOAK_EVERY` the check interval (default 100).

use super::*;
use std::time::Instant;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The peak resident memory of process `pid`, in KiB.
fn vm_hwm_kib(pid: u32) -> f64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

/// Runs one turn in `s` and requires it completed and durable.
fn turn(s: &mut Server, sid: &str) {
    start_turn(s, sid, "read it all");
    let frames = until_finished(s);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{fin}");
    assert_eq!(fin["persistence"], "durable", "{fin}");
}

#[test]
#[ignore = "long: run with --ignored (see the module doc)"]
fn soak_a_thousand_turns_of_twenty_tool_calls() {
    let turns = knob("MC_SOAK_TURNS", 1_000);
    let every = knob("MC_SOAK_EVERY", 100).max(1);
    let env = Env::new();
    // 600 lines of 100 bytes; each call starts at another line (equal calls in a row would be
    // refused as a runaway loop), so each result is about 60 KB.
    fs::write(
        env.cwd.join("a.txt"),
        format!("{}\n", "x".repeat(99)).repeat(600),
    )
    .unwrap();
    let mut steps: Vec<Value> = (0..20)
        .map(|k| json!({"tool": {"name": "read_file", "input": {"path": "a.txt", "offset": k}}}))
        .collect();
    steps.push(json!({"text": "done"}));
    write_script(
        &env,
        json!([{ "steps": steps }]),
        Some(json!({"read": "allow"})),
    );
    let (mut s, sid) = start_session(&env, &[]);
    let mut done = 0;
    let t0 = Instant::now();
    while done < turns {
        let block = every.min(turns - done);
        for _ in 0..block {
            turn(&mut s, &sid);
        }
        done += block;
        let hwm = vm_hwm_kib(s.pid());
        s.shutdown_ok("bye");
        let len = fs::metadata(sessions_dir(&env).join(format!("{sid}.jsonl")))
            .unwrap()
            .len();
        // A fresh child: list, open, page to the end, one more turn.
        let t = Instant::now();
        let mut c = start(&env, &[]);
        let l = result(&c.call("l", "session.list", &json!({}))).clone();
        assert_eq!(l["notices"], json!([]), "{l}");
        let e = &l["sessions"][0];
        assert_eq!(
            (e["session_id"].as_str(), e["eligibility"].as_str()),
            (Some(sid.as_str()), Some("available"))
        );
        let listed = t.elapsed();
        let r = result(&c.call("o", "session.open", &json!({ "session_id": sid }))).clone();
        let rev = r["revision"].as_str().unwrap().to_owned();
        let mut cursor = Value::Null;
        let mut entries = 0;
        for n in 0.. {
            let p = c.call(
                &format!("p{n}"),
                "history.page",
                &json!({ "session_id": sid, "revision": rev, "cursor": cursor }),
            );
            entries += result(&p)["entries"].as_array().unwrap().len();
            cursor = result(&p)["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        let opened = t.elapsed();
        turn(&mut c, &sid);
        done += 1;
        eprintln!(
            "soak: {done} turns, {:.0} MiB on disk, list {:.0} ms, list+open+pages {:.0} ms ({entries} entries), turn child peak {:.0} MiB, {:.0} s so far",
            len as f64 / 1048576.0,
            listed.as_secs_f64() * 1e3,
            opened.as_secs_f64() * 1e3,
            hwm / 1024.0,
            t0.elapsed().as_secs_f64()
        );
        assert!(hwm < 512.0 * 1024.0, "memory stays bounded: {hwm} KiB");
        s = c;
    }
    s.shutdown_ok("bye");
}
