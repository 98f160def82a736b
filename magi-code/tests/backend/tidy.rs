//! Tidy tests of two house rules that review alone used to keep:
//!
//! - the run machine (`src/run/`) is pure: outside test text and `fuzzing.rs` its code names
//!   no clock, file, thread, process, socket or environment ([`IMPURE`]); the driver
//!   (`agent/`) brings all of that in as inputs;
//! - a built-in provider's name is spelled (as a string literal) in its table,
//!   `config/providers.rs`, and nowhere else under `src`.

use super::layering::{is_test_file, non_test, read_tree, scan};
use std::path::Path;

/// What pure code never names (comments and string literals are blanked first).
const IMPURE: [&str; 21] = [
    "Instant",
    "SystemTime",
    "UNIX_EPOCH",
    "std::thread",
    "thread::spawn",
    "thread::sleep",
    "thread::scope",
    "std::fs",
    "fs::",
    "File::",
    "OpenOptions",
    "std::process",
    "Command::new",
    "std::net",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "std::env",
    "io::stdin",
    "libc::",
];

/// The `src` files of `magi-code`, as (path relative to `src`, text).
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    assert!(!files.is_empty(), "no files under {}", src.display());
    files
}

/// Every impure name in the non-test code of the run machine's files, as `path: name`.
fn impure(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        let machine = path.starts_with("run/") && path != "run/fuzzing.rs";
        if !machine || is_test_file(path) {
            continue;
        }
        let code = scan::blank_comments_and_strings(non_test(text));
        let code = String::from_utf8_lossy(&code);
        for name in IMPURE {
            let bounded = code.match_indices(name).any(|(i, _)| {
                let before = code[..i].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if bounded {
                out.push(format!("{path}: {name}"));
            }
        }
    }
    out
}

#[test]
fn the_run_machine_names_no_clock_file_thread_process_or_socket() {
    let found = impure(&sources());
    assert!(
        found.is_empty(),
        "src/run/ is sans-IO: the driver (agent/) brings time and I/O in as inputs:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_purity_check_sees_a_planted_clock_and_not_a_comment_or_a_test() {
    let planted = |text: &str| impure(&[("run/step.rs".to_owned(), text.to_owned())]);
    assert_eq!(
        planted("fn f() { let t = std::time::Instant::now(); }\n"),
        ["run/step.rs: Instant"]
    );
    assert_eq!(planted("use std::fs::File;\n").len(), 2);
    assert!(planted("// Instant::now() is the driver's\nfn f() {}\n").is_empty());
    assert!(planted("fn f() { let s = \"std::fs\"; }\n").is_empty());
    assert!(
        planted("fn f() {}\n#[cfg(test)]\nmod tests { fn g() { std::fs::read(\"x\"); } }\n")
            .is_empty()
    );
    assert!(planted("fn f() { let instant_ok = 1; let my_fs::x = 2; }\n").is_empty());
    let outside = impure(&[("agent/drive.rs".to_owned(), "use std::fs;\n".to_owned())]);
    assert!(outside.is_empty(), "only run/ is bound");
}

/// Every file under `src` but the table whose non-test text spells a built-in provider's name
/// as a string literal, as `path: name`.
fn spelled(files: &[(String, String)], names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        if path == "config/providers.rs" || is_test_file(path) {
            continue;
        }
        for name in names {
            if non_test(text).contains(&format!("\"{name}\"")) {
                out.push(format!("{path}: {name}"));
            }
        }
    }
    out
}

#[test]
fn provider_names_are_spelled_in_their_table_only() {
    let names: Vec<&str> = magi_code::config::providers::names().collect();
    assert!(names.len() >= 4, "{names:?}");
    let found = spelled(&sources(), &names);
    assert!(
        found.is_empty(),
        "a provider is one row of config/providers.rs: ask its row, never its name:\n  {}",
        found.join("\n  ")
    );
    let planted = [(
        "agent/x.rs".to_owned(),
        "fn f(p: &str) -> bool { p == \"codex\" }\n".to_owned(),
    )];
    assert_eq!(spelled(&planted, &names), ["agent/x.rs: codex"]);
}
