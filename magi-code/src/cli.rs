//! Subcommands for people: a demo client exchange and trace replay. None of these run while
//! serving, and none share its output path.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn frame(id: &str, method: &str, params: Value) -> String {
    json!({"protocol":"magi-code.local-agent","version":1,"id":id,"method":method,"params":params})
        .to_string()
}

/// Spawns this binary as `serve --stdio` with piped stdin and stdout.
fn spawn_server(
    tool: &str,
) -> Option<(
    std::process::Child,
    std::process::ChildStdin,
    std::process::ChildStdout,
)> {
    let exe = std::env::current_exe().ok()?;
    let Ok(mut child) = Command::new(exe)
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("magi-code {tool}: could not start the server");
        return None;
    };
    let stdin = child.stdin.take()?;
    let stdout = child.stdout.take()?;
    Some((child, stdin, stdout))
}

/// Spawns `serve --stdio` as a real child over pipes and runs initialize → status →
/// session.create → an echo turn → shutdown, printing every frame. Returns the child's exit
/// code.
pub fn demo() -> i32 {
    let Some((mut child, mut stdin, stdout)) = spawn_server("demo") else {
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

/// A terminal chat for people: spawns `serve --stdio`, creates (or, with `session`, opens) a
/// session, and sends each input line as a turn, printing the reply as it streams. Approval
/// requests are asked on the terminal (default deny). `/quit` or end of input stops.
pub fn chat(session: Option<&str>) -> i32 {
    let Some((mut child, mut to_server, from_server)) = spawn_server("chat") else {
        return 1;
    };
    let (tx, frames) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(from_server).lines().map_while(Result::ok) {
            if tx
                .send(serde_json::from_str(&line).unwrap_or(Value::Null))
                .is_err()
            {
                break;
            }
        }
    });
    let mut n = 0u32;
    let mut send =
        |to: &mut std::process::ChildStdin, method: &str, params: Value| -> Option<String> {
            n += 1;
            let id = format!("c{n}");
            writeln!(to, "{}", frame(&id, method, params)).ok()?;
            Some(id)
        };
    let wait = |id: &str| -> Option<Value> { frames.iter().find(|f| f["id"] == id) };
    let caps = json!({"required_capabilities": ["session.create", "session.open", "turn.start", "approval.answer", "shutdown"]});
    let init = send(&mut to_server, "initialize", caps).and_then(|id| wait(&id));
    if let Some(code) = init.as_ref().and_then(|f| f["error"]["code"].as_str()) {
        eprintln!("magi-code chat: initialization failed: {code}");
        return 1;
    }
    let attach = match session {
        Some(sid) => send(&mut to_server, "session.open", json!({"session_id": sid})),
        None => send(&mut to_server, "session.create", json!({})),
    }
    .and_then(|id| wait(&id));
    let Some(sid) = attach
        .as_ref()
        .and_then(|f| f["result"]["session_id"].as_str())
        .map(str::to_owned)
    else {
        let code = attach
            .as_ref()
            .and_then(|f| f["error"]["code"].as_str())
            .unwrap_or("no answer");
        eprintln!("magi-code chat: could not attach a session: {code}");
        return 1;
    };
    println!(
        "session {sid} (saved once a reply starts; reopen with `magi-code chat --session {sid}`)"
    );
    let stdin = std::io::stdin();
    let mut input = stdin.lock().lines();
    loop {
        print!("you> ");
        let _ = std::io::stdout().flush();
        let Some(Ok(line)) = input.next() else { break };
        let line = line.trim();
        if line == "/quit" {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let Some(id) = send(
            &mut to_server,
            "turn.start",
            json!({"session_id": sid, "prompt": line}),
        ) else {
            break;
        };
        print!("magi> ");
        let _ = std::io::stdout().flush();
        for f in frames.iter() {
            if f["id"] == id.as_str() {
                if let Some(code) = f["error"]["code"].as_str() {
                    println!("[turn refused: {code}]");
                    break;
                }
                continue;
            }
            let data = &f["data"];
            match f["event"].as_str() {
                Some("message.delta") => {
                    print!("{}", data["text"].as_str().unwrap_or_default());
                    let _ = std::io::stdout().flush();
                }
                Some("activity") => println!(
                    "\n[{} {}: {}]",
                    data["name"].as_str().unwrap_or("tool"),
                    data["state"].as_str().unwrap_or(""),
                    data["summary"].as_str().unwrap_or("")
                ),
                Some("approval.requested") => {
                    print!(
                        "\nallow {}? [y/N] ",
                        data["summary"].as_str().unwrap_or("this tool call")
                    );
                    let _ = std::io::stdout().flush();
                    let yes =
                        matches!(input.next(), Some(Ok(a)) if a.trim().eq_ignore_ascii_case("y"));
                    let params = json!({"session_id": sid, "run_id": data["run_id"], "approval_id": data["approval_id"], "allow": yes});
                    send(&mut to_server, "approval.answer", params);
                }
                Some("run.finished") => {
                    let outcome = data["outcome"].as_str().unwrap_or("");
                    if outcome == "completed" {
                        println!();
                    } else {
                        println!(
                            "\n[{outcome}: {}]",
                            data["error_code"].as_str().unwrap_or("-")
                        );
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    if let Some(id) = send(&mut to_server, "shutdown", json!({})) {
        let _ = wait(&id);
    }
    drop(to_server);
    child.wait().ok().and_then(|s| s.code()).unwrap_or(1)
}
