//! Tidy test: frame bodies are built from the `wire/` types, never written by hand with
//! `json!` (issue 15). A run event goes out through `RunOutput::critical(Event)` or the
//! `message.delta` helpers of `agent/emit.rs`, which serialize a `wire::Event`; a result is
//! `wire::body` of its `wire::results` type. This test keeps a hand-written body from
//! creeping back around them:
//!
//! - `WorkerEvent::RunEvent` is built only in `agent/emit.rs`, and `WorkerEvent::RunFinished`
//!   only in `agent/mod.rs` (from `RunOutput::finished_data`);
//! - no `json!` inside the arguments of an event-emitting call (`critical`, `diagnostic`,
//!   `delta`, `delta_wait`), of a `RunEvent`/`RunFinished` construction or of an
//!   `OpOutcome::Result`, anywhere in `src`;
//! - the files whose every frame body is typed hold no `json!` at all ([`FRAMED`]).
//!
//! Only non-test text is read: what comes before a file's first `#[cfg(test)]`, skipping
//! `tests.rs` files and `tests/` folders; `//` comments are blanked.

use std::fs;
use std::path::Path;

/// Files (relative to `src`) that build frame bodies and no other JSON: none may use `json!`.
const FRAMED: [&str; 22] = [
    "agent/emit.rs",
    "agent/drive.rs",
    "run/segment.rs",
    "run/voice.rs",
    "run/machine.rs",
    "run/step.rs",
    "run/call.rs",
    "run/calls.rs",
    "run/compacting.rs",
    "tools/card.rs",
    "run/outcome.rs",
    "session/mod.rs",
    "session/page.rs",
    "session/selection.rs",
    "catalog/status.rs",
    "worker/mod.rs",
    "discovery/discover.rs",
    "discovery/examine.rs",
    "discovery/mod.rs",
    "catalog/mod.rs",
    "catalog/scan.rs",
    "util/paging.rs",
];

/// Calls whose arguments are an event's body or a result.
const EMITTERS: [&str; 7] = [
    ".critical(",
    ".diagnostic(",
    ".delta(",
    ".delta_wait(",
    "RunEvent {",
    "RunFinished {",
    "OpOutcome::Result(",
];

/// Where each `WorkerEvent` that carries a frame body may be built.
const BUILDERS: [(&str, &str); 2] = [
    ("WorkerEvent::RunEvent", "agent/emit.rs"),
    ("WorkerEvent::RunFinished", "agent/mod.rs"),
];

/// A file's non-test text with `//` comments blanked (string contents are kept: a `json!`
/// inside a string literal is not one this test can misread in this code base).
fn code(text: &str) -> String {
    let body = text.find("#[cfg(test)]").map_or(text, |i| &text[..i]);
    body.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text from `open` (just after an opening bracket) to its matching close.
fn balanced(s: &str, open: usize) -> &str {
    let mut depth = 1usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return &s[open..open + i];
                }
            }
            _ => {}
        }
    }
    &s[open..]
}

fn line_of(s: &str, at: usize) -> usize {
    s[..at].matches('\n').count() + 1
}

/// Every broken rule of `files` (path relative to `src`, text).
fn problems(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        let code = code(text);
        for emitter in EMITTERS {
            for (at, _) in code.match_indices(emitter) {
                if balanced(&code, at + emitter.len()).contains("json!") {
                    let line = line_of(&code, at);
                    out.push(format!("{path}:{line}: a `json!` body in `{emitter}`"));
                }
            }
        }
        for (builder, home) in BUILDERS {
            if path != home {
                for (at, _) in code.match_indices(builder) {
                    let line = line_of(&code, at);
                    out.push(format!(
                        "{path}:{line}: `{builder}` is built only in {home}"
                    ));
                }
            }
        }
        if FRAMED.contains(&path.as_str()) {
            for (at, _) in code.match_indices("json!") {
                let line = line_of(&code, at);
                out.push(format!("{path}:{line}: `json!` in a file of typed frames"));
            }
        }
    }
    out
}

fn read(dir: &Path, rel: &str, files: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if p.is_dir() {
            if name != "tests" {
                read(&p, &rel, files);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            files.push((rel, fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn frame_bodies_come_from_the_wire_types() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read(&src, "", &mut files);
    for framed in FRAMED {
        assert!(
            files.iter().any(|(p, _)| p == framed),
            "{framed} is gone: update FRAMED"
        );
    }
    let found = problems(&files);
    assert!(
        found.is_empty(),
        "hand-written frame bodies:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_hand_written_body() {
    let file = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    let bad = [
        file(
            "agent/compaction.rs",
            "fn f(out: &mut O) {\n    out.critical(\n        \"activity\",\n        json!({\"a\": 1}),\n    );\n}\n",
        ),
        file(
            "worker/mod.rs",
            "fn g() { sink.send(WorkerEvent::RunEvent { data: v }); }\n",
        ),
        file("run/segment.rs", "fn h() -> Value { json!({}) }\n"),
    ];
    assert_eq!(
        problems(&bad),
        [
            "agent/compaction.rs:2: a `json!` body in `.critical(`",
            "worker/mod.rs:1: `WorkerEvent::RunEvent` is built only in agent/emit.rs",
            "run/segment.rs:1: `json!` in a file of typed frames",
        ]
    );
    let fine = [
        file(
            "agent/compaction.rs",
            "fn f(out: &mut O) {\n    out.critical(event);\n    let spec = json!({});\n}\n#[cfg(test)]\nmod tests { fn t() { out.critical(json!({})); } }\n",
        ),
        file(
            "agent/emit.rs",
            "// json! once was here\nfn e() { WorkerEvent::RunEvent { data: ev.into_data() }; }\n",
        ),
    ];
    assert_eq!(problems(&fine), Vec::<String>::new());
}
