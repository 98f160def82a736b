//! `docs/schema/protocol.d.ts` under the pinned TypeScript compiler of `tests/fixtures/ts`
//! (the test installs it; a failed install fails the test): the declarations compile alone
//! with `--strict`, every frame of `docs/frontend-guide.md`'s example exchange type-checks as
//! `Frame` (backend) or `Request` (client), and frames the schema refuses do not compile.

use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The compiler's entry point, installed from the pinned lockfile if missing or stale.
fn tsc() -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ts");
    crate::npm::ensure_npm(&fixtures, "node_modules/typescript/bin/tsc")
}

/// One compiler diagnostic: the file's name, its 1-based line, and the message.
#[derive(Debug)]
struct Diagnostic {
    file: String,
    line: usize,
    text: String,
}

/// Runs `tsc --noEmit --strict` on `files` (names inside `dir`) and returns its diagnostics.
fn compile(dir: &Path, files: &[&str]) -> Vec<Diagnostic> {
    let out = Command::new("node")
        .arg(tsc())
        .args(["--noEmit", "--strict", "--pretty", "false"])
        .args(files)
        .current_dir(dir)
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // `name(line,col): error TS…: message`; a continuation line (indented) belongs to the last.
    let mut found: Vec<Diagnostic> = Vec::new();
    for l in stdout.lines() {
        let parsed = l.split_once("): error ").and_then(|(head, text)| {
            let (file, pos) = head.rsplit_once('(')?;
            let line = pos.split(',').next()?.parse().ok()?;
            Some(Diagnostic {
                file: file.to_owned(),
                line,
                text: text.to_owned(),
            })
        });
        match (parsed, found.last_mut()) {
            (Some(d), _) => found.push(d),
            (None, Some(last)) => {
                let _ = write!(last.text, "\n{l}");
            }
            (None, None) => panic!("tsc printed what is not a diagnostic:\n{stdout}"),
        }
    }
    assert_eq!(
        out.status.success(),
        found.is_empty(),
        "tsc exit status {} with diagnostics {found:#?}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    found
}

/// A temporary directory holding a copy of the committed `protocol.d.ts`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("docs/schema/protocol.d.ts"),
        dir.path().join("protocol.d.ts"),
    )
    .unwrap();
    dir
}

/// The guide's client and backend frames, in document order (`true` for a client frame).
fn guide_frames() -> Vec<(bool, Value)> {
    let md = std::fs::read_to_string(repo().join("docs/frontend-guide.md")).unwrap();
    let mut out = Vec::new();
    let mut lines = md.lines();
    while let Some(line) = lines.next() {
        let client = match line.trim_end() {
            "```jsonl client" => true,
            "```jsonl backend" => false,
            _ => continue,
        };
        for l in lines.by_ref().take_while(|l| !l.starts_with("```")) {
            if !l.trim().is_empty() {
                let v = serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("guide frame is not JSON ({e}): {l}"));
                out.push((client, v));
            }
        }
    }
    out
}

const HEADER: &str = "import type { Events, Frame, Methods, Request } from \"./protocol\";\n";

#[test]
fn protocol_d_ts_compiles_alone_under_strict() {
    let dir = workspace();
    let errors = compile(dir.path(), &["protocol.d.ts"]);
    assert!(
        errors.is_empty(),
        "protocol.d.ts does not compile: {errors:#?}"
    );
}

#[test]
fn every_guide_frame_type_checks_against_protocol_d_ts() {
    let frames = guide_frames();
    let clients = frames.iter().filter(|(c, _)| *c).count();
    assert!(
        clients >= 10 && frames.len() - clients >= 20,
        "the guide's exchange was not found ({clients} client frames of {})",
        frames.len()
    );
    let mut ts = String::from(HEADER);
    let (mut r, mut f) = (0, 0);
    for (client, v) in &frames {
        if *client {
            r += 1;
            let _ = writeln!(ts, "const r{r}: Request = {v};");
        } else {
            f += 1;
            let _ = writeln!(ts, "const f{f}: Frame = {v};");
        }
    }
    // Shapes the guide does not show that the declarations must still admit: a client tool's
    // open `input_schema`, the method map's lookups, and a `tool_card` history entry.
    let tool = json!({"protocol": "magi-code.local-agent", "version": 1, "id": "init",
        "method": "initialize", "params": {
            "required_capabilities": ["client.tools", "turn.start"],
            "client_tools": [{"name": "lookup", "description": "Looks a word up.",
                "input_schema": {"type": "object", "properties": {"word": {"type": "string"}},
                    "required": ["word"], "additionalProperties": false}}]}});
    let _ = writeln!(ts, "const tool: Request = {tool};");
    ts.push_str(
        "const start: Methods[\"turn.start\"][\"params\"] = { session_id: \"s\", prompt: \"hi\" };\n\
         const started: Methods[\"turn.start\"][\"result\"] = { accepted: true, run_id: \"r\" };\n\
         const finished: Events[\"run.finished\"][\"outcome\"] = \"cancelled\";\n\
         // @ts-expect-error: a method not in the map has no entry\n\
         const none: Methods[\"turn.pause\"] = {} as never;\n",
    );
    let entry = json!({"protocol": "magi-code.local-agent", "version": 1, "type": "response",
        "instance_id": "i", "seq": 9, "id": "p", "result": {"session_id": "s", "revision": "v",
        "next_cursor": null, "complete": true, "entries": [{"kind": "tool_card",
            "message_id": "m", "text": "", "partial": false, "part": 0, "last_part": true,
            "card": {"kind": "generic", "title": "t", "status": "completed"}}]}});
    let _ = writeln!(ts, "const entry: Frame = {entry};");
    let dir = workspace();
    std::fs::write(dir.path().join("guide.ts"), &ts).unwrap();
    let errors = compile(dir.path(), &["guide.ts"]);
    let lines: Vec<&str> = ts.lines().collect();
    let shown: Vec<String> = errors
        .iter()
        .map(|d| {
            let src = lines.get(d.line - 1).copied().unwrap_or("");
            format!("{}:{}: {}\n    {src}", d.file, d.line, d.text)
        })
        .collect();
    assert!(
        errors.is_empty(),
        "guide frames do not type-check:\n{}",
        shown.join("\n")
    );
}

/// The first guide frame (client or backend) for which `pick` holds, cloned.
fn guide_frame(frames: &[(bool, Value)], pick: impl Fn(bool, &Value) -> bool) -> Value {
    frames
        .iter()
        .find(|(c, v)| pick(*c, v))
        .map(|(_, v)| v.clone())
        .expect("the guide has such a frame")
}

#[test]
fn frames_the_schema_refuses_do_not_compile() {
    let frames = guide_frames();
    let event = |name: &'static str| move |c: bool, v: &Value| !c && v["event"] == name;
    let method = |name: &'static str| move |c: bool, v: &Value| c && v["method"] == name;
    let mut cases: Vec<(&str, &str, Value)> = Vec::new();
    let mut add = |what, ty, v: Value| cases.push((what, ty, v));

    let mut v = guide_frame(&frames, event("run.finished"));
    v["event"] = json!("no.such.event");
    add("an unknown event name", "Frame", v);
    let mut v = guide_frame(&frames, |c, v| !c && v.get("error").is_some());
    v["error"]["code"] = json!("no_such_code");
    add("an unknown error code", "Frame", v);
    let mut v = guide_frame(&frames, event("activity"));
    v["event"] = json!("run.finished");
    add("one event's data under another's name", "Frame", v);
    let mut v = guide_frame(&frames, event("activity"));
    v["data"]["kind"] = json!("plugin");
    add("an unknown activity kind", "Frame", v);
    let mut v = guide_frame(&frames, event("activity"));
    v["data"]["extra"] = json!(1);
    add("an extra member in event data", "Frame", v);
    let mut v = guide_frame(&frames, event("run.finished"));
    v["extra"] = json!(1);
    add("an extra envelope member", "Frame", v);
    let mut v = guide_frame(&frames, |c, v| !c && v["result"]["accepted"] == true);
    v["result"]["extra"] = json!(1);
    add("an extra result member", "Frame", v);
    let mut v = guide_frame(&frames, event("run.finished"));
    v["data"].as_object_mut().unwrap().remove("outcome");
    add("a missing data member", "Frame", v);
    let mut v = guide_frame(&frames, event("run.finished"));
    v["version"] = json!(2);
    add("another protocol version", "Frame", v);
    let mut v = guide_frame(&frames, |c, v| !c && v.get("error").is_some());
    v["error"]["message"] = json!("text");
    add("an error with text", "Frame", v);
    let page = |c: bool, v: &Value| !c && v["result"]["entries"][0]["kind"] == "user";
    let card = json!({"kind": "generic", "title": "t", "status": "completed"});
    let mut v = guide_frame(&frames, page);
    v["result"]["entries"][0]["card"] = card;
    add("a card on a user entry", "Frame", v);
    let mut v = guide_frame(&frames, page);
    v["result"]["entries"][0]["kind"] = json!("tool_card");
    add("a tool_card entry without its card", "Frame", v);

    let mut v = guide_frame(&frames, method("turn.start"));
    v["params"]["prompt"] = json!(42);
    add("a number where a param is a string", "Request", v);
    let mut v = guide_frame(&frames, method("approval.answer"));
    v["params"]["allow"] = json!("yes");
    add("a string where a param is a boolean", "Request", v);
    let mut v = guide_frame(&frames, method("turn.start"));
    v["params"]["model"] = json!("other");
    add("an extra param", "Request", v);
    let mut v = guide_frame(&frames, method("status"));
    v["params"] = json!({"verbose": true});
    add("params where exactly {} is allowed", "Request", v);
    let mut v = guide_frame(&frames, method("status"));
    v["method"] = json!("no.such.method");
    add("an unknown method", "Request", v);
    let mut v = guide_frame(&frames, method("initialize"));
    v["params"]["required_capabilities"] = json!(["status", "no.such.capability"]);
    add("an unknown capability", "Request", v);
    let mut v = guide_frame(&frames, method("turn.cancel"));
    v["params"].as_object_mut().unwrap().remove("run_id");
    add("a missing param", "Request", v);

    let mut ts = String::from(HEADER);
    let first = ts.lines().count() + 1;
    for (i, (_, ty, v)) in cases.iter().enumerate() {
        let _ = writeln!(ts, "const n{i}: {ty} = {v};");
    }
    let dir = workspace();
    std::fs::write(dir.path().join("refused.ts"), &ts).unwrap();
    let errors = compile(dir.path(), &["refused.ts"]);
    let stray: Vec<&Diagnostic> = errors
        .iter()
        .filter(|d| d.file != "refused.ts" || d.line < first || d.line >= first + cases.len())
        .collect();
    assert!(stray.is_empty(), "errors outside the cases: {stray:#?}");
    for (i, (what, _, v)) in cases.iter().enumerate() {
        assert!(
            errors.iter().any(|d| d.line == first + i),
            "{what} compiles, but the schema refuses it: {v}"
        );
    }
}
