//! `magi-code chat`: a terminal client for people, with streaming replies and approval
//! prompts.

use super::client::Server;
use serde_json::{json, Value};
use std::io::{BufRead, Write};

/// A terminal chat for people: spawns `serve --stdio`, creates (or, with `session`, opens) a
/// session, and sends each input line as a turn, printing the reply as it streams. Approval
/// requests are asked on the terminal (default deny). `/quit` or end of input stops.
pub fn chat(session: Option<&str>) -> i32 {
    let Ok(mut server) = Server::spawn_self() else {
        eprintln!("magi-code chat: could not start the server");
        return 1;
    };
    let Some(frames) = server.frames().map(super::client::Frames::into_channel) else {
        return 1;
    };
    let mut n = 0u32;
    let mut send = |to: &mut Server, method: &str, params: Value| -> Option<String> {
        n += 1;
        let id = format!("c{n}");
        to.send(&id, method, &params).ok()?;
        Some(id)
    };
    let wait = |id: &str| -> Option<Value> { frames.iter().find(|f| f["id"] == id) };
    let caps = json!({"required_capabilities": ["session.create", "session.open", "turn.start", "approval.answer", "shutdown"]});
    let init = send(&mut server, "initialize", caps).and_then(|id| wait(&id));
    if let Some(code) = init.as_ref().and_then(|f| f["error"]["code"].as_str()) {
        eprintln!("magi-code chat: initialization failed: {code}");
        return 1;
    }
    let attach = match session {
        Some(sid) => send(&mut server, "session.open", json!({"session_id": sid})),
        None => send(&mut server, "session.create", json!({})),
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
            &mut server,
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
                    send(&mut server, "approval.answer", params);
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
    if let Some(id) = send(&mut server, "shutdown", json!({})) {
        let _ = wait(&id);
    }
    server.wait()
}
