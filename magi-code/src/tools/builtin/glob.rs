//! `glob`: the files a search sees (`walk.rs`) under a folder whose name (a pattern without
//! `/`) or path from that folder (a pattern with `/`) matches, newest modification first; the
//! first [`GLOB_PATHS`], then a line saying how many more matched.

use super::input::{io_phrase, GlobIn, GLOB_PATHS};
use super::walk::{self, Pattern, Root};
use crate::tools::outcome::{bound_output, ToolDetails, ToolOutcome};
use crate::util::cancel::Cancel;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The newest [`GLOB_PATHS`] matches one walker thread found (a min-heap on age, so the oldest
/// goes first) and how many it matched in all.
#[derive(Default)]
struct Newest {
    /// (modified, path) with the path reversed in order, so that of two files as new the one
    /// earlier by path is kept.
    heap: BinaryHeap<Reverse<(SystemTime, Reverse<PathBuf>)>>,
    total: u64,
}

impl Newest {
    fn add(&mut self, modified: SystemTime, path: PathBuf) {
        self.total += 1;
        self.heap.push(Reverse((modified, Reverse(path))));
        if self.heap.len() > GLOB_PATHS {
            self.heap.pop();
        }
    }
}

pub(crate) fn glob(i: GlobIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let pattern = match Pattern::new(&i.pattern) {
        Ok(p) => p,
        Err(e) => return ToolOutcome::fail_with("invalid pattern", &e),
    };
    let root = Root::new(cwd, i.path.as_deref());
    match fs::metadata(&root.abs) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return ToolOutcome::fail("not a folder"),
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    }
    let found = walk::gather(&root.abs, cancel, &Newest::default, &|n, path| {
        if pattern.matches(&root.abs, path) {
            // A file gone meanwhile counts as the oldest rather than not at all.
            let modified = fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            n.add(modified, path.to_path_buf());
        }
        true
    });
    if cancel.is_cancelled() {
        return ToolOutcome::fail("cancelled");
    }
    let total: u64 = found.iter().map(|n| n.total).sum();
    // Newest first; as new, by printed path.
    let mut shown: Vec<(SystemTime, String)> = found
        .into_iter()
        .flat_map(|n| n.heap)
        .map(|Reverse((t, Reverse(p)))| (t, root.show(&p)))
        .collect();
    shown.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    shown.truncate(GLOB_PATHS);
    let mut out: String = shown.iter().map(|(_, p)| format!("{p}\n")).collect();
    let more = total.saturating_sub(shown.len() as u64);
    if more > 0 {
        out.push_str(&format!("[{more} more files matched]\n"));
    }
    let summary = format!("{total} files");
    ToolOutcome::success(summary, bound_output(out, false), false)
        .with(ToolDetails::Search { matches: total })
}
