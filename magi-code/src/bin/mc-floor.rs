//! The benchmark floor: reads a line, parses it with serde_json, writes a fixed response of
//! the size of a `status` answer. Writes are batched until input runs dry, like the engine's.

use std::io::{BufRead, BufReader, BufWriter, Write};

const RESPONSE: &str = concat!(
    r#"{"protocol":"magi-code.local-agent","version":1,"type":"response","instance_id":"00000000-0000-4000-8000-000000000000","seq":1,"id":"floor","#,
    r#""result":{"context_id":"0000000000000000000000000000000000000000000000000000000000000000","model":"echo","provider":"scripted","readiness":"ready","run_id":null,"#,
    r#""selection":{"effective_effort":null,"effort_support":"unsupported","model":"echo","permitted_efforts":["default"],"provider":"scripted","requested_effort":"default","revision":"00000000000000000000000000000000"},"session_id":null,"state":"idle"}}"#,
    "\n"
);

fn main() {
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
