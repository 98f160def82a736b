//! Tests of `grep`'s size bounds: a walk reports the files it skipped for size, and the file
//! `path` names is searched whatever its size (streamed, up to its own bound).

use super::input::{GREP_FILE_BYTES, GREP_NAMED_BYTES};
use super::*;
use crate::tools::outcome::ToolDetails;
use serde_json::json;
use std::fs;
use std::io::Write;

fn go(input: Value, cwd: &Path) -> ToolOutcome {
    run(Builtin::Grep, &input, cwd, &Cancel::default())
}

/// A file of exactly `len` bytes: `head` first, then `z` lines.
fn sized(path: &Path, head: &str, len: u64) {
    let mut f = fs::File::create(path).unwrap();
    f.write_all(head.as_bytes()).unwrap();
    let line = format!("{}\n", "z".repeat(1023));
    let mut left = len - head.len() as u64;
    while left >= line.len() as u64 {
        f.write_all(line.as_bytes()).unwrap();
        left -= line.len() as u64;
    }
    f.write_all(&b"z".repeat(usize::try_from(left).unwrap()))
        .unwrap();
    assert_eq!(fs::metadata(path).unwrap().len(), len);
}

#[test]
fn a_walk_searches_a_file_at_the_bound_and_counts_bigger_ones_as_skipped() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    sized(&p.join("a_at_bound.txt"), "needle\n", GREP_FILE_BYTES);
    sized(&p.join("b_over.txt"), "needle\n", GREP_FILE_BYTES + 1);
    let o = go(json!({"pattern": "needle"}), p);
    assert_eq!(o.summary, "1 matches; 1 file over 1 MiB skipped");
    assert_eq!(
        o.output,
        "[1 file over 1 MiB not searched: name one as path to search it]\na_at_bound.txt:1:needle\n"
    );
    sized(&p.join("c_over.txt"), "x\n", GREP_FILE_BYTES + 2);
    let o = go(json!({"pattern": "nothing-here"}), p);
    assert_eq!(o.summary, "0 matches; 2 files over 1 MiB skipped");
    assert!(o.output.starts_with("[2 files over 1 MiB not searched"));
    fs::remove_file(p.join("b_over.txt")).unwrap();
    fs::remove_file(p.join("c_over.txt")).unwrap();
    let o = go(json!({"pattern": "needle"}), p);
    assert_eq!(o.summary, "1 matches", "nothing skipped, nothing said");
    assert_eq!(o.output, "a_at_bound.txt:1:needle\n");
}

#[test]
fn a_named_file_over_the_walk_bound_is_searched_to_its_end() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let big = p.join("big.log");
    sized(&big, "first needle\r\n", 3 * GREP_FILE_BYTES);
    fs::OpenOptions::new()
        .append(true)
        .open(&big)
        .unwrap()
        .write_all(b"\nlast needle")
        .unwrap();
    let o = go(json!({"pattern": "needle", "path": "big.log"}), p);
    assert!(o.ok);
    assert_eq!(o.summary, "2 matches");
    let lines: Vec<&str> = o.output.lines().collect();
    assert_eq!(lines.len(), 2, "{}", &o.output[..200.min(o.output.len())]);
    assert_eq!(lines[0], "big.log:1:first needle");
    assert!(lines[1].starts_with("big.log:") && lines[1].ends_with(":last needle"));
    assert_eq!(o.details, ToolDetails::Search { matches: 2 });
}

#[test]
fn a_named_line_over_the_line_bound_is_matched_on_its_first_mib() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let bound = usize::try_from(GREP_FILE_BYTES).unwrap();
    // Line 1: the needle ends exactly at the bound; line 2: the needle just past it.
    let mut text = "a".repeat(bound - 6);
    text.push_str("needle\n");
    text.push_str(&"b".repeat(bound - 5));
    text.push_str("needle\nthird needle\n");
    fs::write(p.join("long.txt"), &text).unwrap();
    let o = go(json!({"pattern": "needle", "path": "long.txt"}), p);
    assert_eq!(o.summary, "2 matches", "lines 1 and 3, not 2");
    assert!(o.output.contains(":1:aaa"));
    assert!(o.output.ends_with("long.txt:3:third needle\n"));
}

#[test]
fn a_named_binary_file_says_where_it_stopped() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("b.bin"), b"needle\nneedle \0 here\nneedle\n").unwrap();
    let o = go(json!({"pattern": "needle", "path": "b.bin"}), d.path());
    assert_eq!(o.summary, "1 matches; binary file: stopped at line 2");
    assert_eq!(
        o.output,
        "[binary file (a NUL byte at line 2): not searched from there]\nb.bin:1:needle\n"
    );
}

#[test]
fn a_named_file_is_read_up_to_its_own_bound() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let f = p.join("huge.txt");
    sized(&f, "needle\n", GREP_NAMED_BYTES);
    let o = go(json!({"pattern": "needle", "path": "huge.txt"}), p);
    assert_eq!(o.summary, "1 matches", "at the bound: all of it searched");
    fs::OpenOptions::new()
        .append(true)
        .open(&f)
        .unwrap()
        .write_all(b"\nneedle past the bound\n")
        .unwrap();
    let o = go(json!({"pattern": "needle", "path": "huge.txt"}), p);
    assert_eq!(o.summary, "1 matches; only the first 64 MiB searched");
    assert_eq!(
        o.output,
        "[only the first 64 MiB of the file were searched]\nhuge.txt:1:needle\n"
    );
}
