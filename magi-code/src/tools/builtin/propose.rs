//! What a file tool would change, before it runs: the unified diff a person reads in an
//! approval (`tool.diff`, negotiated `tool.details`). Computed the way the tool computes its
//! change, reading and writing nothing else; a call that would fail proposes nothing.

use super::apply::planned;
use super::diff::line_counts;
use super::input::{open_regular, read_bounded, ApplyPatchIn, EditFileIn, WriteFileIn, FILE_BYTES};
use super::patch;
use crate::util::redact::{redact_loaded, sanitize_text};
use crate::util::text::cut;
use crate::wire::events::ToolDiffData;
use protocol_core::limits::TOOL_DIFF_BYTES;
use serde_json::Value;
use similar::TextDiff;
use std::fs;
use std::path::Path;
use std::time::Duration;

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// How long one file's diff may search for the smallest change before it settles for a
/// larger one (the counts come from [`line_counts`] either way).
const DIFF_TIME: Duration = Duration::from_millis(500);

/// A proposed change: the diff within `max` bytes and the line counts of the whole change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// A unified diff of every file, sanitized and redacted.
    pub diff: String,
    /// Lines added in all files.
    pub added: u64,
    /// Lines removed in all files.
    pub removed: u64,
    /// The diff was cut to its bound.
    pub truncated: bool,
}

/// One file: its old and new names and contents (`None`: absent).
struct Change {
    was: String,
    now: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

/// The change tool `name` with `input` would make in `cwd`, its diff cut to `max` bytes;
/// `None` for other tools and for calls that would fail.
#[must_use]
pub fn propose(name: &str, input: &Value, cwd: &Path, max: usize) -> Option<Proposal> {
    let changes = match name {
        "write_file" => vec![written(serde_json::from_value(input.clone()).ok()?, cwd)?],
        "edit_file" => vec![edited(serde_json::from_value(input.clone()).ok()?, cwd)?],
        "apply_patch" => patched(serde_json::from_value(input.clone()).ok()?, cwd)?,
        _ => return None,
    };
    Some(render(&changes, max))
}

/// `event` with the diff and counts of what tool `name` with `input` would change in `cwd`
/// (cut to `tool.details`' bound), or `None` when it would change nothing or fail.
#[must_use]
pub fn diff_event(
    name: &str,
    input: &Value,
    cwd: &Path,
    event: ToolDiffData,
) -> Option<ToolDiffData> {
    let p = propose(name, input, cwd, TOOL_DIFF_BYTES)?;
    (!p.diff.is_empty()).then_some(ToolDiffData {
        diff: p.diff,
        added: p.added,
        removed: p.removed,
        truncated: p.truncated,
        ..event
    })
}

/// The file's content now, `None` when there is none; `Err` when it cannot be read whole.
fn read(path: &Path) -> Result<Option<Vec<u8>>, ()> {
    let real = match fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(()),
    };
    let file = open_regular(&real).map_err(|_| ())?;
    match read_bounded(file, FILE_BYTES) {
        Ok((buf, false)) => Ok(Some(buf)),
        _ => Err(()),
    }
}

fn written(i: WriteFileIn, cwd: &Path) -> Option<Change> {
    if i.content.len() as u64 > FILE_BYTES {
        return None;
    }
    Some(Change {
        before: read(&cwd.join(&i.path)).ok()?,
        after: Some(i.content.into_bytes()),
        now: i.path.clone(),
        was: i.path,
    })
}

fn edited(i: EditFileIn, cwd: &Path) -> Option<Change> {
    let hay = read(&cwd.join(&i.path)).ok()??;
    let old = i.old.as_bytes();
    if old.is_empty() {
        return None;
    }
    let at = memchr::memmem::find(&hay, old)?;
    if memchr::memmem::find(&hay[at + 1..], old).is_some() {
        return None;
    }
    let mut after = hay[..at].to_vec();
    after.extend_from_slice(i.new.as_bytes());
    after.extend_from_slice(&hay[at + old.len()..]);
    Some(Change {
        before: Some(hay),
        after: Some(after),
        now: i.path.clone(),
        was: i.path,
    })
}

fn patched(i: ApplyPatchIn, cwd: &Path) -> Option<Vec<Change>> {
    if i.patch.len() as u64 > FILE_BYTES {
        return None;
    }
    let ops = patch::parse(&i.patch).ok()?;
    ops.iter()
        .map(|op| {
            let p = planned(op, cwd).ok()?;
            let before = (!matches!(op, patch::Op::Add { .. })).then_some(p.before);
            Some(Change {
                was: p.was,
                now: p.shown,
                before,
                after: p.content,
            })
        })
        .collect()
}

/// Every file's diff, joined and cut at a line within `max` bytes, with the counts of all.
fn render(changes: &[Change], max: usize) -> Proposal {
    let (mut added, mut removed) = (0, 0);
    let mut diff = String::new();
    for c in changes {
        let before = c.before.as_deref().unwrap_or_default();
        let after = c.after.as_deref().unwrap_or_default();
        let (a, r) = line_counts(before, after);
        added += a;
        removed += r;
        diff.push_str(&file_diff(c, before, after));
    }
    let diff = redact_loaded(sanitize_text(&diff));
    if diff.len() <= max {
        return Proposal {
            diff,
            added,
            removed,
            truncated: false,
        };
    }
    let kept = cut(&diff, max.saturating_sub(64));
    let kept = &kept[..kept.rfind('\n').map_or(0, |i| i + 1)];
    let left = diff[kept.len()..].lines().count();
    Proposal {
        diff: format!("{kept}[{left} more lines of the diff left out]\n"),
        added,
        removed,
        truncated: true,
    }
}

/// One file's unified diff with `---`/`+++` headers (`/dev/null` for an absent side).
fn file_diff(c: &Change, before: &[u8], after: &[u8]) -> String {
    let old = match c.before {
        Some(_) => format!("a/{}", c.was),
        None => "/dev/null".to_owned(),
    };
    let new = match c.after {
        Some(_) => format!("b/{}", c.now),
        None => "/dev/null".to_owned(),
    };
    if before.contains(&0) || after.contains(&0) {
        return format!("--- {old}\n+++ {new}\nbinary content changed\n");
    }
    let (before, after) = (
        String::from_utf8_lossy(before),
        String::from_utf8_lossy(after),
    );
    let diff = TextDiff::configure()
        .timeout(DIFF_TIME)
        .diff_lines(before.as_ref(), after.as_ref());
    let body = diff
        .unified_diff()
        .context_radius(CONTEXT)
        .missing_newline_hint(true)
        .to_string();
    if body.is_empty() && c.was == c.now {
        return String::new();
    }
    format!("--- {old}\n+++ {new}\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_new_file_is_all_added() {
        let d = dir();
        let p = propose(
            "write_file",
            &json!({"path": "a.txt", "content": "one\ntwo\n"}),
            d.path(),
            16_384,
        )
        .unwrap();
        assert_eq!(
            p.diff,
            "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
        );
        assert_eq!((p.added, p.removed, p.truncated), (2, 0, false));
        assert!(!d.path().join("a.txt").exists(), "nothing is written");
    }

    #[test]
    fn an_edit_shows_its_lines_in_context() {
        let d = dir();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        fs::write(d.path().join("f.rs"), &text).unwrap();
        let input = json!({"path": "f.rs", "old": "line 5\n", "new": "line five\nline 5b\n"});
        let p = propose("edit_file", &input, d.path(), 16_384).unwrap();
        assert_eq!(
            p.diff,
            "--- a/f.rs\n+++ b/f.rs\n@@ -2,7 +2,8 @@\n line 2\n line 3\n line 4\n-line 5\n+line five\n+line 5b\n line 6\n line 7\n line 8\n"
        );
        assert_eq!((p.added, p.removed), (2, 1));
        assert_eq!(fs::read_to_string(d.path().join("f.rs")).unwrap(), text);
        // An edit that would fail proposes nothing.
        let missing = json!({"path": "f.rs", "old": "nowhere", "new": "x"});
        assert_eq!(propose("edit_file", &missing, d.path(), 16_384), None);
        assert_eq!(
            propose("read_file", &json!({"path": "f.rs"}), d.path(), 16_384),
            None
        );
    }

    #[test]
    fn a_patch_diffs_every_file_and_a_long_diff_is_cut_at_a_line() {
        let d = dir();
        fs::write(d.path().join("old.txt"), "gone\n").unwrap();
        fs::write(d.path().join("m.txt"), "a\nb\n").unwrap();
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Delete File: old.txt\n*** Update File: m.txt\n@@\n a\n-b\n+c\n*** End Patch";
        let p = propose("apply_patch", &json!({ "patch": patch }), d.path(), 16_384).unwrap();
        assert!(
            p.diff
                .contains("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n"),
            "{}",
            p.diff
        );
        assert!(
            p.diff
                .contains("--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n"),
            "{}",
            p.diff
        );
        assert!(
            p.diff
                .contains("--- a/m.txt\n+++ b/m.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"),
            "{}",
            p.diff
        );
        assert_eq!((p.added, p.removed), (2, 2));

        let big: String = (0..2_000).map(|i| format!("row {i}\n")).collect();
        let p = propose(
            "write_file",
            &json!({"path": "big.txt", "content": big}),
            d.path(),
            1_000,
        )
        .unwrap();
        assert!(p.truncated);
        assert!(p.diff.len() <= 1_000, "{}", p.diff.len());
        assert!(
            p.diff.ends_with(" more lines of the diff left out]\n"),
            "{}",
            p.diff
        );
        let shown = p
            .diff
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .count();
        let left: usize = p
            .diff
            .rsplit('[')
            .next()
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(shown + left, 2_000, "every line is shown or counted");
        assert_eq!(p.added, 2_000, "the counts stay whole");
    }

    #[test]
    fn a_secret_in_the_content_is_redacted() {
        let d = dir();
        let key = format!("sk-ant-api03-{}", "x".repeat(40));
        let input = json!({"path": "k.env", "content": format!("KEY={key}\n")});
        let p = propose("write_file", &input, d.path(), 16_384).unwrap();
        assert!(!p.diff.contains(&key), "{}", p.diff);
    }
}
