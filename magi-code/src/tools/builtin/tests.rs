//! Tests of the built-in tools.

use super::input::{FILE_BYTES, LIST_ENTRIES};
use super::*;
use crate::tools::outcome::{
    bound_output, bound_parts, cut_line, CUT_LINE_ROOM, HALF_BYTES, OUTPUT_BYTES, SUMMARY_BYTES,
    TRUNCATED,
};
use serde_json::json;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::process::Command;
use std::time::{Duration, Instant};

fn go(name: &str, input: Value, cwd: &Path) -> ToolOutcome {
    run(b(name), &input, cwd, &Cancel::default())
}

fn b(name: &str) -> Builtin {
    Builtin::named(name).unwrap_or_else(|| panic!("{name} is no built-in"))
}

fn assert_invalid(name: &str, input: Value, cwd: &Path) {
    let o = go(name, input.clone(), cwd);
    assert!(!o.ok, "{name} {input}");
    assert_eq!(o.summary, "invalid input", "{name} {input}");
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success());
    assert!(fs::metadata(path).unwrap().file_type().is_fifo());
}

#[test]
fn classes() {
    assert_eq!(class("read_file"), Some(ToolClass::Read));
    assert_eq!(class("list_dir"), Some(ToolClass::Read));
    assert_eq!(class("grep"), Some(ToolClass::Read));
    assert_eq!(class("glob"), Some(ToolClass::Read));
    assert_eq!(class("write_file"), Some(ToolClass::Write));
    assert_eq!(class("edit_file"), Some(ToolClass::Write));
    assert_eq!(class("shell"), Some(ToolClass::Shell));
    assert_eq!(class("bash"), None);
    assert_eq!(class(""), None);
    assert_eq!(Builtin::named("Shell"), None);
    for tool in Builtin::ALL {
        assert_eq!(Builtin::named(tool.name()), Some(tool));
        assert_eq!(class(tool.name()), Some(tool.class()));
    }
    let names: Vec<&str> = Builtin::ALL.iter().map(|t| t.name()).collect();
    let offered: Vec<String> = specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, offered, "ALL is the offer order");
}

#[test]
fn read_file_success_offset_limit() {
    let d = tempfile::tempdir().unwrap();
    let body: String = (0..10).map(|k| format!("line {k}\n")).collect();
    fs::write(d.path().join("f.txt"), &body).unwrap();
    let o = go("read_file", json!({"path": "f.txt"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (true, "read 10 lines"));
    assert_eq!(o.output, body);
    let o = go(
        "read_file",
        json!({"path": "f.txt", "offset": 3, "limit": 2}),
        d.path(),
    );
    assert_eq!((o.ok, o.summary.as_str()), (true, "read 2 lines"));
    assert_eq!(o.output, "line 3\nline 4\n");
    let o = go("read_file", json!({"path": "f.txt", "offset": 9}), d.path());
    assert_eq!(o.output, "line 9\n");
    let o = go(
        "read_file",
        json!({"path": "f.txt", "offset": 50}),
        d.path(),
    );
    assert_eq!(
        (o.ok, o.summary.as_str(), o.output.as_str()),
        (true, "read 0 lines", "")
    );
    // Absolute paths work; a last line without LF counts.
    let abs = d.path().join("g.txt");
    fs::write(&abs, "a\nb").unwrap();
    let o = go(
        "read_file",
        json!({"path": abs.to_str().unwrap()}),
        d.path(),
    );
    assert_eq!(
        (o.summary.as_str(), o.output.as_str()),
        ("read 2 lines", "a\nb")
    );
    // Default limit 2,000 lines.
    fs::write(d.path().join("many"), "x\n".repeat(3_000)).unwrap();
    let o = go("read_file", json!({"path": "many"}), d.path());
    assert_eq!(o.summary, "read 2000 lines");
    let o = go(
        "read_file",
        json!({"path": "many", "limit": 10000}),
        d.path(),
    );
    assert_eq!(o.summary, "read 3000 lines");
    // Lossy UTF-8.
    fs::write(d.path().join("bin"), b"ok\xff\n").unwrap();
    let o = go("read_file", json!({"path": "bin"}), d.path());
    assert_eq!(o.output, "ok\u{fffd}\n");
}

#[test]
fn read_file_failures() {
    let d = tempfile::tempdir().unwrap();
    let o = go("read_file", json!({"path": "missing.txt"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
    assert!(!o.output.contains(d.path().to_str().unwrap()));
    let o = go("read_file", json!({"path": "."}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
    fs::write(d.path().join("f"), "x").unwrap();
    let o = go("read_file", json!({"path": "f/g"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
}

#[test]
fn fifo_never_hangs() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("pipe");
    mkfifo(&fifo);
    let start = Instant::now();
    let o = go("read_file", json!({"path": "pipe"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
    let o = go(
        "write_file",
        json!({"path": "pipe", "content": "x"}),
        d.path(),
    );
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
    let o = go(
        "edit_file",
        json!({"path": "pipe", "old": "a", "new": "b"}),
        d.path(),
    );
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
    fs::write(d.path().join("f.txt"), "needle\n").unwrap();
    let o = go("grep", json!({"pattern": "needle"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (true, "1 matches"));
    let o = go(
        "grep",
        json!({"pattern": "needle", "path": "pipe"}),
        d.path(),
    );
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// Splits a cut output into (head, cut line, tail).
fn cut_apart(out: &str) -> (&str, &str, &str) {
    let at = out.find("\n[… ").expect("a cut line");
    let (line, tail) = out[at + 1..].split_once('\n').unwrap();
    (&out[..at], line, tail)
}

#[test]
fn output_keeps_both_ends_around_a_cut_line() {
    // Exactly OUTPUT_BYTES is kept whole; one byte more is cut in the middle.
    let s = "b".repeat(OUTPUT_BYTES);
    assert!(bound_output(s.clone(), false) == s);
    let s = format!("{}{}", "h".repeat(HALF_BYTES), "t".repeat(HALF_BYTES + 1));
    let out = bound_output(s.clone(), false);
    assert!(out.len() <= OUTPUT_BYTES && out.len() > OUTPUT_BYTES - CUT_LINE_ROOM);
    let (head, line, tail) = cut_apart(&out);
    assert!(s.starts_with(head) && s.ends_with(tail));
    assert!(head.chars().all(|c| c == 'h') && tail.chars().all(|c| c == 't'));
    let room = OUTPUT_BYTES - CUT_LINE_ROOM;
    assert_eq!((head.len(), tail.len()), (room / 2, room - room / 2));
    assert_eq!(line, cut_line((s.len() - head.len() - tail.len()) as u64));
    assert_eq!(line, format!("[… {} bytes cut …]", s.len() - room));

    // "€" (3 bytes) straddles both cut points: each is dropped whole.
    let (hb, tb) = (room / 2, room - room / 2);
    let s = format!(
        "{}€{}€{}",
        "a".repeat(hb - 1),
        "m".repeat(OUTPUT_BYTES),
        "z".repeat(tb - 2)
    );
    let out = bound_output(s.clone(), false);
    assert!(out.len() <= OUTPUT_BYTES);
    let (head, line, tail) = cut_apart(&out);
    assert!(head == "a".repeat(hb - 1));
    assert!(tail == "z".repeat(tb - 2));
    assert_eq!(line, cut_line((OUTPUT_BYTES + 6) as u64));

    // Output the tool cut short keeps its marker, within the bound.
    let fits = format!("{}x", "b".repeat(OUTPUT_BYTES - TRUNCATED.len() - 2));
    let out = bound_output(fits.clone(), true);
    assert_eq!(out.len(), OUTPUT_BYTES);
    assert!(out == format!("{fits}\n{TRUNCATED}"));
    let out = bound_output(format!("{fits}y"), true);
    assert!(out.len() <= OUTPUT_BYTES);
    assert!(out.ends_with(&format!("xy\n{TRUNCATED}")));
    assert!(out.contains("\n[… ") && out.contains(" bytes cut …]\n"));
    assert_eq!(
        bound_output("x\n".to_owned(), true),
        format!("x\n{TRUNCATED}")
    );
    assert_eq!(bound_output(String::new(), true), TRUNCATED);
    // A stream whose middle was dropped before: the count includes it.
    assert_eq!(
        bound_parts("ab", 10, "yz", false),
        format!("ab\n{}\nyz", cut_line(10))
    );
    assert_eq!(bound_parts("ab\n", 0, "yz", false), "ab\nyz");

    // End to end through read_file: lines of multi-byte characters, both ends kept.
    let d = tempfile::tempdir().unwrap();
    let line = format!("{}\n", "é€😀".repeat(33)); // 9 * 33 + 1 bytes
    let body = line.repeat(1_000);
    fs::write(d.path().join("big"), &body).unwrap();
    let o = go("read_file", json!({"path": "big"}), d.path());
    assert!(o.ok);
    assert_eq!(o.summary, "read 1000 lines");
    assert!(o.output.len() <= OUTPUT_BYTES);
    assert!(o.output.len() > OUTPUT_BYTES - CUT_LINE_ROOM - 4);
    let (head, _, tail) = cut_apart(&o.output);
    assert!(body.starts_with(head) && body.ends_with(tail));
    assert!(tail.ends_with(&line));
}

#[test]
fn read_file_over_8_mib_is_marked() {
    let d = tempfile::tempdir().unwrap();
    let big = "y\n".repeat((FILE_BYTES as usize) / 2 + 10);
    fs::write(d.path().join("huge"), big).unwrap();
    let o = go("read_file", json!({"path": "huge", "limit": 5}), d.path());
    assert_eq!(
        (o.summary.as_str(), o.output.as_str()),
        ("read 5 lines", "y\n".repeat(5).as_str())
    );
    let offset = (FILE_BYTES as usize) / 2 - 2;
    let o = go(
        "read_file",
        json!({"path": "huge", "offset": offset}),
        d.path(),
    );
    assert_eq!(o.summary, "read 2 lines");
    assert_eq!(o.output, format!("y\ny\n{TRUNCATED}"));
}

#[test]
fn list_dir_sorted_and_bounded() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("b.txt"), "").unwrap();
    fs::write(d.path().join("a.txt"), "").unwrap();
    fs::create_dir(d.path().join("c")).unwrap();
    fs::create_dir(d.path().join("a")).unwrap();
    let o = go("list_dir", json!({"path": "."}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (true, "4 entries"));
    assert_eq!(o.output, "a/\na.txt\nb.txt\nc/\n");
    let o = go("list_dir", json!({"path": "a.txt"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not a folder"));
    let o = go("list_dir", json!({"path": "nope"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));

    let many = d.path().join("many");
    fs::create_dir(&many).unwrap();
    for k in (0..1_005).rev() {
        fs::write(many.join(format!("f{k:04}")), "").unwrap();
    }
    let o = go("list_dir", json!({"path": "many"}), d.path());
    assert_eq!((o.ok, o.summary.as_str()), (true, "1005 entries"));
    let lines: Vec<&str> = o.output.lines().collect();
    assert_eq!(lines.len(), LIST_ENTRIES + 1);
    assert_eq!(lines[0], "f0000");
    assert_eq!(lines[999], "f0999");
    assert_eq!(lines[1000], TRUNCATED);
}

#[test]
fn input_validation() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::write(p.join("f"), "a\n").unwrap();
    let cases = [
        ("read_file", json!({"path": "f", "extra": 1})),
        ("read_file", json!({})),
        ("read_file", json!({"path": 3})),
        ("read_file", json!({"path": "f", "offset": -1})),
        ("read_file", json!({"path": "f", "offset": 1.5})),
        ("read_file", json!({"path": "f", "offset": "1"})),
        ("read_file", json!({"path": "f", "offset": null})),
        ("read_file", json!({"path": "f", "limit": 0})),
        ("read_file", json!({"path": "f", "limit": 10_001})),
        ("read_file", json!(["f"])),
        ("read_file", json!("f")),
        ("read_file", Value::Null),
        ("list_dir", json!({"path": ".", "recursive": true})),
        ("list_dir", json!({})),
        ("list_dir", json!({"path": ["."]})),
        ("grep", json!({"pattern": "x", "glob": 1})),
        ("glob", json!({"pattern": "*.rs", "glob": "x"})),
        ("glob", json!({"path": "."})),
        ("grep", json!({"path": "."})),
        ("grep", json!({"pattern": 1})),
        ("grep", json!({"pattern": "x", "path": null})),
        (
            "write_file",
            json!({"path": "w", "content": "x", "mode": 420}),
        ),
        ("write_file", json!({"path": "w"})),
        ("write_file", json!({"path": "w", "content": ["x"]})),
        (
            "edit_file",
            json!({"path": "f", "old": "a", "new": "b", "all": true}),
        ),
        ("edit_file", json!({"path": "f", "old": "a"})),
        ("edit_file", json!({"path": "f", "old": "a", "new": false})),
        ("shell", json!({"command": "true", "env": {}})),
        ("shell", json!({})),
        ("shell", json!({"command": ["true"]})),
        ("shell", json!({"command": "true", "timeout_ms": 0})),
        ("shell", json!({"command": "true", "timeout_ms": 600_001})),
        ("shell", json!({"command": "true", "timeout_ms": "5"})),
    ];
    for (name, input) in cases {
        assert_invalid(name, input, p);
    }
    assert!(!p.join("w").exists());
    assert_eq!(fs::read_to_string(p.join("f")).unwrap(), "a\n");
    let o = go(
        "shell",
        json!({"command": "true", "timeout_ms": 600_000}),
        p,
    );
    assert!(o.ok);
    let o = go(
        "read_file",
        json!({"path": "f", "offset": 0, "limit": 10_000}),
        p,
    );
    assert!(o.ok);
}

#[test]
fn describe_is_bounded_safe_and_one_line() {
    assert_eq!(
        describe(b("read_file"), &json!({"path": "src/lib.rs"})),
        "read_file src/lib.rs"
    );
    assert_eq!(
        describe(b("shell"), &json!({"command": "cargo test"})),
        "shell: cargo test"
    );
    assert_eq!(describe(b("list_dir"), &json!({"path": "."})), "list_dir .");
    assert_eq!(
        describe(b("grep"), &json!({"pattern": "fn main"})),
        "grep fn main in ."
    );
    assert_eq!(
        describe(
            b("write_file"),
            &json!({"path": "a", "content": "secret body"})
        ),
        "write_file a (11 bytes)"
    );
    assert_eq!(
        describe(
            b("edit_file"),
            &json!({"path": "a", "old": "x", "new": "y"})
        ),
        "edit_file a"
    );
    assert_eq!(
        describe(b("shell"), &json!({"command": 1})),
        "shell (invalid input)"
    );
    let d = describe(
        b("shell"),
        &json!({"command": "curl -H 'x-api-key: sk-ant-api03-secret1234567' u"}),
    );
    assert!(!d.contains("sk-ant") && !d.contains("secret123"), "{d}");
    assert_eq!(d, "shell: curl -H 'x-api-key: [redacted]' u");
    // Decision 35: a digest is shown as written.
    let d = describe(
        b("shell"),
        &json!({"command": "git reset --hard 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"}),
    );
    assert_eq!(
        d,
        "shell: git reset --hard 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
    );
    let d = describe(
        b("shell"),
        &json!({"command": "a\nb\tc\r\u{1b}[31md\u{2028}e"}),
    );
    assert_eq!(d, "shell: a b c[31md e");
    let long = "€".repeat(1_000);
    let d = describe(b("shell"), &json!({ "command": long }));
    assert!(d.len() <= SUMMARY_BYTES && d.len() > SUMMARY_BYTES - 4);
    assert!(d.starts_with("shell: €"));
    // Summaries never carry raw output.
    let tmp = tempfile::tempdir().unwrap();
    let o = go(
        "shell",
        json!({"command": "echo sk-ant-secret123"}),
        tmp.path(),
    );
    assert_eq!(o.summary, "exit 0");
}
