//! Replays the committed cargo-fuzz corpus (`fuzz/corpus/<target>/*`) and any saved crash
//! inputs (`fuzz/regressions/<target>/*`) through the same `protocol_core::fuzzing` functions
//! the fuzz targets call, so `cargo test` checks them on stable without libFuzzer.

use std::fs;
use std::panic;
use std::path::{Path, PathBuf};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 3] = [
    ("framing", protocol_core::fuzzing::framing),
    ("envelope", protocol_core::fuzzing::envelope),
    ("engine", protocol_core::fuzzing::engine),
];

/// Corpora of magi-code's targets, replayed by `magi-code/tests/backend/fuzz_corpus.rs` (`run`:
/// by `run::fuzzing`'s own test).
const MAGI_CODE_TARGETS: [&str; 12] = [
    "sse",
    "anthropic",
    "openai_chat",
    "openai_responses",
    "mcp_jsonrpc",
    "profile_front_matter",
    "run",
    "code_host_lines",
    "mcp_http_answer",
    "history",
    "claude_cli",
    "acp_rpc",
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Regular files directly inside `dir`, sorted; none when `dir` does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

/// Runs every input of `fuzz/<kind>/<target>/` and fails naming each input that panicked.
fn replay(kind: &str, target: &str, f: Target) -> usize {
    let files = inputs(&fuzz_dir().join(kind).join(target));
    let mut failed = Vec::new();
    for path in &files {
        let data = fs::read(path).expect("readable corpus file");
        if panic::catch_unwind(|| f(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} inputs of fuzz/{kind}/{target} panicked: {failed:#?}",
        failed.len(),
        files.len()
    );
    files.len()
}

#[test]
fn corpus_replays_cleanly() {
    for (target, f) in TARGETS {
        let n = replay("corpus", target, f);
        eprintln!("fuzz/corpus/{target}: {n} inputs replayed");
        assert!(n > 0, "no corpus files replayed for target `{target}`");
    }
}

#[test]
fn regressions_replay_cleanly() {
    // Optional: present only once a fuzz run has found and saved a crash.
    for (target, f) in TARGETS {
        replay("regressions", target, f);
    }
}

#[test]
fn corpus_has_only_known_targets() {
    let dirs = inputs_dirs(&fuzz_dir().join("corpus"));
    assert!(!dirs.is_empty(), "fuzz/corpus is missing");
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            TARGETS.iter().any(|(t, _)| *t == name) || MAGI_CODE_TARGETS.contains(&name.as_str()),
            "fuzz/corpus/{name} has no matching protocol_core::fuzzing function"
        );
    }
}

fn inputs_dirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|it| {
            it.map(|e| e.expect("readable directory entry").path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}
