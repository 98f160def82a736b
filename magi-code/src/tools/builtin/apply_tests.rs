//! `apply_patch` on real files: every op, all or nothing (a third hunk that does not apply
//! leaves every file byte for byte), a move onto an existing file, CRLF files, modes kept, the
//! input bound at its edge, the approval summary and the card.

use super::input::FILE_BYTES;
use super::*;
use crate::tools::card::Card;
use crate::tools::outcome::ToolDetails;
use serde_json::json;
use std::fs;
use std::os::unix::fs::PermissionsExt;

fn apply(patch: &str, cwd: &Path) -> ToolOutcome {
    run(
        Builtin::ApplyPatch,
        &json!({ "patch": patch }),
        cwd,
        &Cancel::default(),
    )
}

/// Every file under `dir` with its bytes, sorted.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

const THREE: &str = "*** Begin Patch
*** Add File: new.txt
+first
+second
*** Update File: a.rs
*** Move to: b.rs
@@ fn main() {
-    old();
+    new();
*** Delete File: old.txt
*** End Patch
";

#[test]
fn adds_moves_and_deletes_in_one_call() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::write(p.join("a.rs"), "fn main() {\n    old();\n}\n").unwrap();
    fs::set_permissions(p.join("a.rs"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::write(p.join("old.txt"), "gone\nsoon\n").unwrap();
    let o = apply(THREE, p);
    assert!(o.ok, "{}", o.output);
    assert_eq!(o.output, "A new.txt\nM b.rs\nD old.txt\n");
    assert_eq!(o.summary, "3 files");
    assert_eq!(
        o.details,
        ToolDetails::FileEdit {
            added: 3,
            removed: 3
        }
    );
    assert_eq!(
        fs::read_to_string(p.join("new.txt")).unwrap(),
        "first\nsecond\n"
    );
    assert_eq!(
        fs::read_to_string(p.join("b.rs")).unwrap(),
        "fn main() {\n    new();\n}\n"
    );
    let mode = fs::metadata(p.join("b.rs")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the mode moves with the file");
    assert!(!p.join("a.rs").exists() && !p.join("old.txt").exists());
}

#[test]
fn nothing_changes_when_any_hunk_or_file_check_fails() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::write(p.join("a.txt"), "one\ntwo\n").unwrap();
    fs::write(p.join("b.txt"), "three\n").unwrap();
    fs::write(p.join("c.txt"), "four\nfive\n").unwrap();
    let before = snapshot(p);
    // The third hunk's context is not in c.txt.
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n\
                 *** Update File: b.txt\n@@\n-three\n+THREE\n\
                 *** Update File: c.txt\n@@\n four\n-six\n+SIX\n*** End Patch\n";
    let o = apply(patch, p);
    assert!(!o.ok);
    assert_eq!(o.summary, "patch does not apply");
    assert!(
        o.output.contains("c.txt: could not find:\nfour\nsix"),
        "{}",
        o.output
    );
    assert_eq!(snapshot(p), before, "every file byte for byte");
    // A file to add that exists, one to update or delete that does not.
    for (patch, says) in [
        ("*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch", "a.txt: already exists"),
        ("*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch", "nope.txt: does not exist"),
        (
            "*** Begin Patch\n*** Update File: b.txt\n@@\n-three\n+3\n*** Update File: nope\n@@\n-x\n+y\n*** End Patch",
            "nope: does not exist",
        ),
    ] {
        let o = apply(patch, p);
        assert!(!o.ok && o.output.contains(says), "{}", o.output);
        assert_eq!(snapshot(p), before);
    }
    let o = apply("*** Begin Patch\n*** Update File: a.txt\n*** End Patch", p);
    assert_eq!((o.ok, o.summary.as_str()), (false, "invalid patch"));
}

#[test]
fn a_move_onto_an_existing_file_replaces_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::write(p.join("from.txt"), "a\n").unwrap();
    fs::write(p.join("to.txt"), "was here\n").unwrap();
    let o = apply(
        "*** Begin Patch\n*** Update File: from.txt\n*** Move to: to.txt\n@@\n-a\n+b\n*** End Patch",
        p,
    );
    assert!(o.ok, "{}", o.output);
    assert_eq!(o.output, "M to.txt\n");
    assert_eq!(fs::read_to_string(p.join("to.txt")).unwrap(), "b\n");
    assert!(!p.join("from.txt").exists());
}

#[test]
fn crlf_files_stay_crlf() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::write(p.join("w.txt"), "one\r\ntwo\r\n").unwrap();
    let o = apply(
        "*** Begin Patch\n*** Update File: w.txt\n@@\n one\n-two\n+2\n*** End Patch",
        p,
    );
    assert!(o.ok, "{}", o.output);
    assert_eq!(fs::read(p.join("w.txt")).unwrap(), b"one\r\n2\r\n");
}

#[test]
fn a_patch_at_the_input_bound_applies_and_one_byte_more_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let head = "*** Begin Patch\n*** Add File: big.txt\n+";
    let tail = "\n*** End Patch\n";
    let fill = FILE_BYTES as usize - head.len() - tail.len();
    let patch = format!("{head}{}{tail}", "z".repeat(fill));
    assert_eq!(patch.len() as u64, FILE_BYTES);
    let o = apply(&patch, p);
    assert!(o.ok, "{}", o.summary);
    assert_eq!(
        fs::metadata(p.join("big.txt")).unwrap().len(),
        fill as u64 + 1
    );
    let over = format!("{head}{}{tail}", "z".repeat(fill + 1));
    fs::remove_file(p.join("big.txt")).unwrap();
    let o = apply(&over, p);
    assert_eq!((o.ok, o.summary.as_str()), (false, "too large"));
    assert!(!p.join("big.txt").exists());
}

#[test]
fn the_approval_names_every_file_and_the_card_counts_them_all() {
    let input = json!({ "patch": THREE });
    assert_eq!(
        describe(Builtin::ApplyPatch, &input),
        "apply_patch new.txt (new, +2), a.rs -> b.rs +1 -1, old.txt (deleted)"
    );
    let card = Card::new("apply_patch", &input, Path::new("/w"));
    let done =
        ToolOutcome::success("3 files".into(), String::new(), false).with(ToolDetails::FileEdit {
            added: 3,
            removed: 3,
        });
    let shown = card.render(crate::tools::card::CardStatus::Completed, Some(&done));
    let v = serde_json::to_value(shown).unwrap();
    assert_eq!(
        (&v["kind"], &v["title"], &v["path"]),
        (&json!("file_edit"), &json!("3 files"), &json!("new.txt")),
        "{v}"
    );
    assert_eq!((&v["added"], &v["removed"]), (&json!(3), &json!(3)), "{v}");
}
