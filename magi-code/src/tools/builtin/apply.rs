//! `apply_patch`: a patch in Codex's format (`patch.rs`) applied all or nothing. Every hunk
//! of every file is located first and every file checked (an added one must not exist, an
//! updated or deleted one must); only then is each file replaced atomically (the `write_file`
//! rule), moved or removed. The output lists `A`, `M` and `D` lines.

use super::diff::line_counts;
use super::input::{io_phrase, open_regular, read_bounded, ApplyPatchIn, FILE_BYTES};
use super::patch::{self, Op};
use crate::store::{replace_atomically, Sweep};
use crate::tools::outcome::{ToolDetails, ToolOutcome};
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One file's planned change, checked and computed, not yet written.
pub(crate) struct Planned {
    /// `A`, `M` or `D`.
    letter: char,
    /// The path as the patch names it (the new one for a move).
    pub(crate) shown: String,
    /// The path it had (a move's old one).
    pub(crate) was: String,
    /// The content before (empty for an added file).
    pub(crate) before: Vec<u8>,
    /// Where it is written (or removed).
    target: PathBuf,
    /// The new content (`None`: removed).
    pub(crate) content: Option<Vec<u8>>,
    /// The mode kept from the old file.
    mode: Option<u32>,
    /// A moved file's old place, removed once the new one is written.
    remove: Option<PathBuf>,
    added: u64,
    removed: u64,
}

pub(crate) fn apply_patch(i: ApplyPatchIn, cwd: &Path) -> ToolOutcome {
    if i.patch.len() as u64 > FILE_BYTES {
        return ToolOutcome::fail("too large");
    }
    let ops = match patch::parse(&i.patch) {
        Ok(ops) => ops,
        Err(why) => return ToolOutcome::fail_with("invalid patch", &why),
    };
    let mut plan = Vec::with_capacity(ops.len());
    for op in &ops {
        match planned(op, cwd) {
            Ok(p) => plan.push(p),
            Err((summary, detail)) => return ToolOutcome::fail_with(summary, &detail),
        }
    }
    let mut targets: Vec<&PathBuf> = plan.iter().map(|p| &p.target).collect();
    targets.sort();
    if targets.windows(2).any(|w| w[0] == w[1]) {
        return ToolOutcome::fail_with("invalid patch", "a file is changed twice");
    }
    let mut done = Vec::with_capacity(plan.len());
    for p in &plan {
        if let Err(e) = write(p) {
            // What was written stays written: say which, and where it stopped.
            let detail = format!(
                "{}\nstopped at {}: {}",
                done.join("\n"),
                p.shown,
                io_phrase(&e)
            );
            return ToolOutcome::fail_with("not applied whole", detail.trim_start());
        }
        done.push(format!("{} {}", p.letter, p.shown));
    }
    let (added, removed) = plan
        .iter()
        .fold((0, 0), |(a, r), p| (a + p.added, r + p.removed));
    let n = plan.len();
    let summary = if n == 1 {
        "1 file".to_owned()
    } else {
        format!("{n} files")
    };
    ToolOutcome::success(summary, format!("{}\n", done.join("\n")), false)
        .with(ToolDetails::FileEdit { added, removed })
}

/// Checks `op` against the files and computes its result; `Err` is a summary and the detail
/// naming the file (and the lines not found).
pub(crate) fn planned(op: &Op, cwd: &Path) -> Result<Planned, (&'static str, String)> {
    let path = op.path();
    let at = cwd.join(path);
    let failed = |why: &str| ("patch does not apply", format!("{path}: {why}"));
    match op {
        Op::Add { lines, .. } => {
            if fs::symlink_metadata(&at).is_ok() {
                return Err(failed("already exists"));
            }
            let mut content = lines.join("\n");
            content.push('\n');
            let added = lines.len() as u64;
            Ok(Planned {
                letter: 'A',
                shown: path.to_owned(),
                was: path.to_owned(),
                before: Vec::new(),
                target: at,
                content: Some(content.into_bytes()),
                mode: None,
                remove: None,
                added,
                removed: 0,
            })
        }
        Op::Delete { .. } => {
            let (real, before, _) = current(&at).map_err(&failed)?;
            let (_, removed) = line_counts(&before, b"");
            Ok(Planned {
                letter: 'D',
                shown: path.to_owned(),
                was: path.to_owned(),
                before,
                target: real,
                content: None,
                mode: None,
                remove: None,
                added: 0,
                removed,
            })
        }
        Op::Update { move_to, hunks, .. } => {
            let (real, before, mode) = current(&at).map_err(&failed)?;
            let text = String::from_utf8_lossy(&before);
            let after = patch::apply(&text, hunks)
                .map_err(|lines| failed(&format!("could not find:\n{lines}")))?;
            if after.len() as u64 > FILE_BYTES {
                return Err(failed("too large"));
            }
            let (added, removed) = line_counts(&before, after.as_bytes());
            let (target, shown, remove) = match move_to {
                Some(to) => (cwd.join(to), to.clone(), Some(real)),
                None => (real, path.to_owned(), None),
            };
            Ok(Planned {
                letter: 'M',
                shown,
                was: path.to_owned(),
                before,
                target,
                content: Some(after.into_bytes()),
                mode: Some(mode),
                remove,
                added,
                removed,
            })
        }
    }
}

/// The file at `at` (a symbolic link's target): its real path, content and mode.
fn current(at: &Path) -> Result<(PathBuf, Vec<u8>, u32), &'static str> {
    let real = fs::canonicalize(at).map_err(|e| match e.kind() {
        ErrorKind::NotFound => "does not exist",
        _ => io_phrase(&e),
    })?;
    let file = open_regular(&real)?;
    let mode = file
        .metadata()
        .map_err(|e| io_phrase(&e))?
        .permissions()
        .mode()
        & 0o7777;
    match read_bounded(file, FILE_BYTES) {
        Ok((_, true)) => Err("too large"),
        Ok((buf, false)) => Ok((real, buf, mode)),
        Err(e) => Err(io_phrase(&e)),
    }
}

/// Carries out one planned change: temp file, fsync, rename (creating missing folders), then
/// a moved file's old place removed; or the file removed.
fn write(p: &Planned) -> std::io::Result<()> {
    let Some(content) = &p.content else {
        return fs::remove_file(&p.target);
    };
    if let Some(parent) = p.target.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    replace_atomically(&p.target, content, p.mode, Sweep::Beside)?;
    match &p.remove {
        Some(old) if *old != p.target => fs::remove_file(old),
        _ => Ok(()),
    }
}

/// The approval summary: every file with its added and removed line counts.
pub(crate) fn describe(patch: &str) -> Option<String> {
    let ops = patch::parse(patch).ok()?;
    let files: Vec<String> = ops
        .iter()
        .map(|op| {
            let (a, r) = patch::op_counts(op);
            match op {
                Op::Add { path, .. } => format!("{path} (new, +{a})"),
                Op::Delete { path } => format!("{path} (deleted)"),
                Op::Update {
                    path,
                    move_to: Some(to),
                    ..
                } => format!("{path} -> {to} +{a} -{r}"),
                Op::Update { path, .. } => format!("{path} +{a} -{r}"),
            }
        })
        .collect();
    Some(format!("apply_patch {}", files.join(", ")))
}
