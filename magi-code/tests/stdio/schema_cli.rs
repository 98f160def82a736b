//! `magi-code schema` prints the committed contract, and every frame `magi-code demo` prints
//! validates against it.

use crate::common::schema::check_frame;
use crate::common::Env;
use serde_json::Value;
use std::path::Path;

fn committed(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schema")
        .join(file);
    std::fs::read_to_string(path).expect("docs/schema is committed")
}

#[test]
fn schema_prints_the_committed_files() {
    let env = Env::new();
    let out = env.command(&["schema"]).output().expect("run schema");
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed("magi-code.local-agent.v1.json"),
        "run `cargo run -p magi-code -- schema > docs/schema/magi-code.local-agent.v1.json`"
    );
    let out = env
        .command(&["schema", "--typescript"])
        .output()
        .expect("run schema --typescript");
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed("protocol.d.ts"),
        "run `cargo run -p magi-code -- schema --typescript > docs/schema/protocol.d.ts`"
    );
}

#[test]
fn every_frame_the_demo_prints_validates() {
    let env = Env::new();
    let out = env.command(&["demo"]).output().expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut events = 0;
    let mut responses = 0;
    for line in text.lines() {
        if let Some(frame) = line.strip_prefix("← ") {
            let v: Value = serde_json::from_str(frame).expect("a JSON frame");
            check_frame(0, &v);
            events += usize::from(v["type"] == "event");
            responses += usize::from(v["type"] == "response");
        }
    }
    assert_eq!(responses, 5, "{text}");
    assert!(events >= 3, "the turn's events: {text}");
}

#[test]
fn the_demo_exits_1_when_startup_fails() {
    let env = Env::new();
    env.write_global_settings_raw(b"{not json");
    let out = env.command(&["demo"]).output().expect("run demo");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("magi-code doctor"));
}
