//! The benchmarks' floor, run as the bench executable itself (`<bench> mc-floor`), so that the
//! package installs nothing but `magi-code`: reads a line, parses it with serde_json, writes a
//! fixed response of the size of a `status` answer. Writes are batched until input runs dry,
//! like the engine's.
//!
//! `<bench> mc-floor sse URL`: the streaming floor of the agent benchmark. POSTs to the Chat
//! Completions path under URL, reads its SSE, and writes one `message.delta`-shaped line per
//! event on stdout, flushing whenever the input runs dry.

use std::process::Command;

/// The first argument that makes a bench executable the floor.
pub const ARG: &str = "mc-floor";

/// Runs as the floor and exits, when this process was started as one.
pub fn serve_if_asked() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(ARG) {
        return;
    }
    if args.len() == 4 && args[2] == "sse" {
        sse(&args[3]);
    } else {
        serve();
    }
    std::process::exit(0);
}

/// A command that starts the floor (this executable with [`ARG`]).
pub fn command() -> Command {
    let mut c = Command::new(std::env::current_exe().expect("the bench executable"));
    c.arg(ARG);
    c
}

use std::io::{BufRead, BufReader, BufWriter, Write};

const RESPONSE: &str = concat!(
    r#"{"protocol":"magi-code.local-agent","version":1,"type":"response","instance_id":"00000000-0000-4000-8000-000000000000","seq":1,"id":"floor","#,
    r#""result":{"context_id":"0000000000000000000000000000000000000000000000000000000000000000","model":"echo","provider":"scripted","readiness":"ready","run_id":null,"#,
    r#""selection":{"effective_effort":null,"effort_support":"unsupported","model":"echo","permitted_efforts":["default"],"provider":"scripted","requested_effort":"default","revision":"00000000000000000000000000000000"},"session_id":null,"state":"idle"}}"#,
    "\n"
);

/// The streaming floor: plain HTTP/1.1 over a socket, SSE `data:` lines parsed with serde_json,
/// one line written per event.
fn sse(url: &str) {
    use std::net::TcpStream;
    let addr = url.trim_start_matches("http://");
    let Ok(mut s) = TcpStream::connect(addr) else {
        return;
    };
    let body = b"{}";
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    if s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body))
        .is_err()
    {
        return;
    }
    let mut input = BufReader::new(s);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    let mut seq = 0u64;
    loop {
        if input.buffer().is_empty() && out.flush().is_err() {
            return;
        }
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(data.trim()).unwrap_or_default();
        seq += 1;
        let text = v["choices"][0]["delta"]["content"].as_str().unwrap_or("");
        let frame = serde_json::json!({"protocol": "magi-code.local-agent", "version": 1, "type": "event", "seq": seq, "event": "message.delta", "data": {"text": text}});
        if writeln!(out, "{frame}").is_err() {
            return;
        }
    }
    let _ = writeln!(
        out,
        "{}",
        serde_json::json!({"event": "run.finished", "data": {"outcome": "completed"}})
    );
    let _ = out.flush();
}

fn serve() {
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        if input.buffer().is_empty() && out.flush().is_err() {
            return;
        }
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&line);
        std::hint::black_box(&parsed);
        if out.write_all(RESPONSE.as_bytes()).is_err() {
            return;
        }
    }
    let _ = out.flush();
}
