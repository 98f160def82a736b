//! Subcommands for people: a demo client exchange and trace replay. None of these run while
//! serving, and none share its output path.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn frame(id: &str, method: &str, params: Value) -> String {
    json!({"protocol":"magi-code.local-agent","version":1,"id":id,"method":method,"params":params})
        .to_string()
}

/// Spawns `serve --stdio` as a real child over pipes and runs initialize → status →
/// session.create → an echo turn → shutdown, printing every frame. Returns the child's exit
/// code.
pub fn demo() -> i32 {
    let Ok(exe) = std::env::current_exe() else {
        return 1;
    };
    let Ok(mut child) = Command::new(exe)
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("magi-code demo: could not start the server");
        return 1;
    };
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return 1;
    };
    let mut lines = BufReader::new(stdout).lines();
    // Sends one request and prints frames until its answer (and, for a turn, its terminal).
    let mut exchange =
        |id: &str, method: &str, params: Value, until_event: Option<&str>| -> Option<Value> {
            let f = frame(id, method, params);
            println!("→ {f}");
            writeln!(stdin, "{f}").ok()?;
            let mut answer = None;
            while let Some(Ok(l)) = lines.next() {
                println!("← {l}");
                let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
                if v["id"] == id {
                    answer = Some(v.clone());
                    if until_event.is_none() || v.get("error").is_some() {
                        break;
                    }
                }
                if until_event.is_some_and(|e| v["event"] == e) {
                    break;
                }
            }
            answer
        };
    let caps =
        json!({"required_capabilities": ["status", "session.create", "turn.start", "shutdown"]});
    exchange("r1", "initialize", caps, None);
    exchange("r2", "status", json!({}), None);
    let created = exchange("r3", "session.create", json!({}), None);
    if let Some(sid) = created
        .as_ref()
        .and_then(|c| c["result"]["session_id"].as_str())
    {
        let params = json!({"session_id": sid, "prompt": "Hello from the magi-code demo."});
        exchange("r4", "turn.start", params, Some("run.finished"));
    }
    exchange("r5", "shutdown", json!({}), None);
    drop(stdin);
    let code = child.wait().ok().and_then(|s| s.code()).unwrap_or(1);
    println!("server exited with status {code}");
    code
}

/// Replays a trace file through the engine and prints the differences.
pub fn replay(path: &std::path::Path) -> i32 {
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("magi-code replay: cannot read the trace file");
        return 2;
    };
    let report = protocol_core::trace::replay(&text);
    for m in &report.mismatches {
        println!("line {}: {}", m.line, m.what);
    }
    println!(
        "{} records, {} children, {} mismatches",
        report.records,
        report.children,
        report.mismatches.len()
    );
    i32::from(!report.mismatches.is_empty())
}
