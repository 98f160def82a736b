//! Replays every input of the provider fuzz targets' corpora (`fuzz/corpus/<target>`, and
//! `fuzz/regressions/<target>` where it exists) through the same entry points the libFuzzer
//! targets call, so CI checks them without libFuzzer.

use magi_code::providers::fuzzing;
use std::path::Path;

/// A fuzz entry point.
type Entry = fn(&[u8]);

const TARGETS: [(&str, Entry); 11] = [
    ("sse", fuzzing::sse),
    ("anthropic", fuzzing::anthropic),
    ("openai_chat", fuzzing::openai_chat),
    ("openai_responses", fuzzing::openai_responses),
    ("mcp_jsonrpc", magi_code::mcp::jsonrpc::fuzz),
    ("mcp_http_answer", magi_code::mcp::http_wire::fuzz),
    ("code_host_lines", magi_code::codemode::protocol::fuzz),
    (
        "profile_front_matter",
        magi_code::config::fuzzing::profile_front_matter,
    ),
    ("history", magi_code::history::fuzz),
    ("claude_cli", magi_code::providers::claude_cli::fuzz),
    ("acp_rpc", magi_code::acp::rpc::fuzz),
];

/// Runs every file of `fuzz/<kind>/<target>` through `entry`; returns how many there were
/// (none when the folder does not exist).
fn replay(kind: &str, target: &str, entry: Entry) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut paths: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    for path in &paths {
        let data = std::fs::read(path).unwrap();
        // A panic names the input, so a failing corpus file is easy to find.
        let ok = std::panic::catch_unwind(|| entry(&data)).is_ok();
        assert!(ok, "{kind}/{target}: {} panicked", path.display());
    }
    paths.len()
}

#[test]
fn provider_fuzz_corpora_replay_without_panics() {
    for (target, entry) in TARGETS {
        assert!(
            replay("corpus", target, entry) > 0,
            "{target}: empty corpus"
        );
        replay("regressions", target, entry);
    }
    // The Anthropic corpus carries the quoted streams of provider-streams.md 1.
    assert!(replay("corpus", "anthropic", fuzzing::anthropic) >= 6);
}
