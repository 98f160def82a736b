//! `grep` and `glob` at every rule of "which files a search sees" (`backend.md` "Tools and
//! approvals"), ripgrep's: each ignore source, hidden names, binary files, symbolic links, an
//! explicit path searched anyway, the `glob` narrowing, and the 500-match and 1,000-path bounds
//! with their lines.

use super::input::{GLOB_PATHS, GREP_MATCHES};
use super::*;
use crate::tools::outcome::{ToolDetails, OUTPUT_BYTES};
use serde_json::json;
use std::fs;
use std::time::{Duration, SystemTime};

fn grep(input: Value, cwd: &Path) -> ToolOutcome {
    run(Builtin::Grep, &input, cwd, &Cancel::default())
}

fn glob(input: Value, cwd: &Path) -> ToolOutcome {
    run(Builtin::Glob, &input, cwd, &Cancel::default())
}

/// Writes `text` to `p`, creating its folders.
fn put(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// The paths of a grep's output lines.
fn paths(o: &ToolOutcome) -> Vec<String> {
    o.output
        .lines()
        .map(|l| l.split(':').next().unwrap().to_owned())
        .collect()
}

/// A git repository (a `.git` folder is what ripgrep looks for) with every ignore source but
/// the global one, each hiding one file holding `needle`, and two files it keeps.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::create_dir_all(p.join(".git/info")).unwrap();
    put(&p.join(".gitignore"), "node_modules/\n*.log\n");
    put(&p.join("sub/.gitignore"), "gen.rs\n");
    put(&p.join(".git/info/exclude"), "excluded.txt\n");
    put(&p.join("docs/.ignore"), "draft.md\n");
    put(&p.join(".rgignore"), "vendor/\n");
    for hidden in [
        "node_modules/pkg/index.js",
        "debug.log",
        "sub/gen.rs",
        "excluded.txt",
        "docs/draft.md",
        "vendor/lib.c",
        ".hidden/secret.txt",
        ".env",
        ".git/config",
    ] {
        put(&p.join(hidden), "needle\n");
    }
    put(&p.join("src/main.rs"), "fn main() { needle(); }\n");
    put(&p.join("sub/kept.rs"), "// needle\n");
    d
}

#[test]
fn grep_leaves_out_what_each_ignore_source_hidden_names_and_git_leave_out() {
    let d = repo();
    let o = grep(json!({"pattern": "needle"}), d.path());
    assert!(o.ok, "{}", o.output);
    assert_eq!(paths(&o), ["src/main.rs", "sub/kept.rs"], "{}", o.output);
    assert_eq!(o.summary, "2 matches");
    assert_eq!(o.details, ToolDetails::Search { matches: 2 });
    assert_eq!(
        o.output,
        "src/main.rs:1:fn main() { needle(); }\nsub/kept.rs:1:// needle\n"
    );
}

#[test]
fn outside_a_git_repository_gitignore_does_not_apply_but_ignore_files_do() {
    let d = repo();
    fs::remove_dir_all(d.path().join(".git")).unwrap();
    let o = grep(json!({"pattern": "needle"}), d.path());
    let found = paths(&o);
    for kept in [
        "debug.log",
        "node_modules/pkg/index.js",
        "sub/gen.rs",
        "excluded.txt",
    ] {
        assert!(found.contains(&kept.to_owned()), "{kept}: {found:?}");
    }
    for left in ["docs/draft.md", "vendor/lib.c", ".env"] {
        assert!(!found.contains(&left.to_owned()), "{left}: {found:?}");
    }
}

#[test]
fn a_path_that_names_an_ignored_or_hidden_folder_or_file_is_searched_anyway() {
    let d = repo();
    let p = d.path();
    let o = grep(json!({"pattern": "needle", "path": "node_modules"}), p);
    assert_eq!(paths(&o), ["node_modules/pkg/index.js"]);
    let o = grep(json!({"pattern": "needle", "path": ".hidden"}), p);
    assert_eq!(paths(&o), [".hidden/secret.txt"]);
    let o = grep(json!({"pattern": "needle", "path": "debug.log"}), p);
    assert_eq!(o.output, "debug.log:1:needle\n");
    // Outside the cwd, paths print absolute; inside it, relative.
    let o = grep(json!({"pattern": "needle", "path": "../"}), &p.join("src"));
    let abs = p.join("sub/kept.rs");
    assert_eq!(paths(&o), [abs.to_string_lossy().as_ref(), "main.rs"]);
}

#[test]
fn glob_narrows_the_files_and_never_adds_an_ignored_one_back() {
    let d = repo();
    let p = d.path();
    let o = grep(json!({"pattern": "needle", "glob": "*.rs"}), p);
    assert_eq!(paths(&o), ["src/main.rs", "sub/kept.rs"]);
    let o = grep(json!({"pattern": "needle", "glob": "sub/**"}), p);
    assert_eq!(paths(&o), ["sub/kept.rs"]);
    let o = grep(json!({"pattern": "needle", "glob": "*.js"}), p);
    assert_eq!((o.summary.as_str(), o.output.as_str()), ("0 matches", ""));
    let o = grep(json!({"pattern": "needle", "glob": "a["}), p);
    assert_eq!((o.ok, o.summary.as_str()), (false, "invalid glob"));
}

#[test]
fn binary_files_are_left_out_symlinks_not_followed_and_case_is_asked_for() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    put(&p.join("a.txt"), "Needle\nneedle\n");
    fs::write(p.join("bin.dat"), b"needle\n\0\n").unwrap();
    fs::create_dir_all(p.join("real")).unwrap();
    put(&p.join("real/r.txt"), "needle\n");
    std::os::unix::fs::symlink(p.join("real"), p.join("link")).unwrap();
    std::os::unix::fs::symlink(p.join("a.txt"), p.join("a-link.txt")).unwrap();
    let o = grep(json!({"pattern": "needle"}), p);
    assert_eq!(o.output, "a.txt:2:needle\nreal/r.txt:1:needle\n");
    let o = grep(json!({"pattern": "needle", "case_insensitive": true}), p);
    assert_eq!(o.summary, "3 matches");
    // A binary file named as path: searched up to its NUL, which the output says.
    let o = grep(json!({"pattern": "needle", "path": "bin.dat"}), p);
    assert!(o.ok);
    assert!(
        o.output.starts_with("[binary file: a NUL byte at byte"),
        "{}",
        o.output
    );
    assert!(o.summary.contains("binary file"), "{}", o.summary);
}

#[test]
fn no_file_is_left_out_for_its_size_and_crlf_lines_print_without_cr() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let mut big = "z".repeat(3 << 20);
    big.push_str("\r\nlast needle\r\n");
    fs::write(p.join("big.txt"), big).unwrap();
    let o = grep(json!({"pattern": "needle"}), p);
    assert_eq!(o.output, "big.txt:2:last needle\n");
}

#[test]
fn the_first_500_matches_in_path_and_line_order_then_how_many_more() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    put(&p.join("b"), &"hit\n".repeat(GREP_MATCHES));
    let o = grep(json!({"pattern": "hit"}), p);
    assert_eq!(o.summary, "500 matches");
    assert!(
        o.output.ends_with("b:500:hit\n"),
        "no line when none more matched"
    );
    put(&p.join("a"), "hit\nhit\n");
    put(&p.join("c"), "hit\n");
    let o = grep(json!({"pattern": "hit"}), p);
    assert_eq!(o.summary, "503 matches");
    let lines: Vec<&str> = o.output.lines().collect();
    assert_eq!(lines.len(), GREP_MATCHES + 1);
    assert_eq!(
        (lines[0], lines[1], lines[2]),
        ("a:1:hit", "a:2:hit", "b:1:hit")
    );
    assert_eq!(lines[499], "b:498:hit");
    assert_eq!(lines[500], "[3 more matches left out]");
    // Long lines: the output stays within its bound, the count line kept at its end.
    put(
        &p.join("a"),
        &format!("hit{}\n", "€".repeat(400)).repeat(600),
    );
    let o = grep(json!({"pattern": "hit"}), p);
    assert!(o.output.len() <= OUTPUT_BYTES);
    assert!(
        o.output.ends_with("[601 more matches left out]\n"),
        "{}",
        &o.output[o.output.len() - 80..]
    );
}

#[test]
fn grep_errors_are_fixed_phrases() {
    let d = tempfile::tempdir().unwrap();
    let o = grep(json!({"pattern": "(unclosed"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "invalid pattern"));
    let o = grep(json!({"pattern": "x", "path": "missing"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
    let o = grep(json!({"pattern": "x", "case_insensitive": "yes"}), d.path());
    assert!(!o.ok);
}

/// Sets `p`'s modification time to `secs` after the epoch.
fn aged(p: &Path, secs: u64) {
    fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn glob_lists_matching_files_newest_first_under_the_same_rules() {
    let d = repo();
    let p = d.path();
    put(&p.join("src/lib.rs"), "");
    aged(&p.join("src/main.rs"), 1_000);
    aged(&p.join("src/lib.rs"), 3_000);
    aged(&p.join("sub/kept.rs"), 2_000);
    let o = glob(json!({"pattern": "*.rs"}), p);
    assert!(o.ok, "{}", o.output);
    assert_eq!(o.output, "src/lib.rs\nsub/kept.rs\nsrc/main.rs\n");
    assert_eq!(o.summary, "3 files");
    let o = glob(json!({"pattern": "src/*.rs"}), p);
    assert_eq!(o.output, "src/lib.rs\nsrc/main.rs\n");
    let o = glob(json!({"pattern": "*.rs", "path": "sub"}), p);
    assert_eq!(o.output, "sub/kept.rs\n");
    // Folders are not listed; ignored files are not either.
    let o = glob(json!({"pattern": "*"}), p);
    assert!(!o.output.contains("node_modules") && !o.output.lines().any(|l| l == "src"));
    let o = glob(json!({"pattern": "*.rs", "path": "src/main.rs"}), p);
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a folder"));
}

#[test]
fn glob_shows_the_1000_newest_then_how_many_more() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for i in 0..=GLOB_PATHS {
        let f = p.join(format!("f{i:04}.txt"));
        put(&f, "");
        aged(&f, 10_000 + i as u64);
    }
    let o = glob(json!({"pattern": "*.txt"}), p);
    let lines: Vec<&str> = o.output.lines().collect();
    assert_eq!(lines.len(), GLOB_PATHS + 1);
    assert_eq!(lines[0], "f1000.txt");
    assert_eq!(lines[999], "f0001.txt");
    assert_eq!(lines[1000], "[1 more files matched]");
    fs::remove_file(p.join("f0000.txt")).unwrap();
    let o = glob(json!({"pattern": "*.txt"}), p);
    assert_eq!(o.output.lines().count(), GLOB_PATHS);
}
