//! `grep`: a regex over a bounded walk of the tree.

use super::input::{
    io_phrase, open_regular, read_bounded, GrepIn, GREP_ENTRIES, GREP_FILES, GREP_FILE_BYTES,
    GREP_MATCHES,
};
use crate::tools::outcome::{bound_parts, ToolDetails, ToolOutcome, HALF_BYTES, OUTPUT_BYTES};
use crate::util::cancel::Cancel;
use crate::util::proc::Capture;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// What `grep` found so far.
struct GrepState {
    re: regex::Regex,
    out: Capture,
    matches: usize,
    truncated: bool,
}

impl GrepState {
    /// Searches one file; false once the match bound is reached.
    fn search(&mut self, abs: &Path, display: &Path) -> bool {
        let Ok(file) = open_regular(abs) else {
            return true;
        };
        if file.metadata().map_or(true, |m| m.len() > GREP_FILE_BYTES) {
            return true;
        }
        let Ok((buf, over)) = read_bounded(file, GREP_FILE_BYTES) else {
            return true;
        };
        if over || memchr::memchr(0, &buf).is_some() {
            return true;
        }
        let text = String::from_utf8_lossy(&buf);
        let display = display.to_string_lossy();
        for (k, line) in text.lines().enumerate() {
            if !self.re.is_match(line) {
                continue;
            }
            if self.matches == GREP_MATCHES {
                self.truncated = true;
                return false;
            }
            self.matches += 1;
            self.out
                .push(format!("{display}:{}:{line}\n", k + 1).as_bytes());
        }
        true
    }
}

pub(crate) fn grep(i: GrepIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let re = match regex::Regex::new(&i.pattern) {
        Ok(re) => re,
        Err(e) => return ToolOutcome::fail_with("invalid pattern", &e.to_string()),
    };
    let arg = i.path.as_deref().unwrap_or(".");
    let root = cwd.join(arg);
    // Shown paths start from the path as given, without `./`, so they work with `read_file`.
    let base: PathBuf = Path::new(arg)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let meta = match fs::metadata(&root) {
        Ok(m) => m,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let mut st = GrepState {
        re,
        out: Capture::new(OUTPUT_BYTES, HALF_BYTES),
        matches: 0,
        truncated: false,
    };
    if meta.is_file() {
        st.search(&root, &base);
    } else if meta.is_dir() {
        if let Err(p) = grep_tree(&mut st, root, base, cancel) {
            return ToolOutcome::fail(p);
        }
    } else {
        return ToolOutcome::fail("not a file");
    }
    let summary = format!("{} matches", st.matches);
    let found = st.out.parts();
    let output = bound_parts(&found.head, found.dropped, &found.tail, st.truncated);
    let matches = st.matches as u64;
    ToolOutcome::success(summary, output, false).with(ToolDetails::Search { matches })
}

/// Walks a folder in sorted pre-order: no symlinks, no `.git` or `target` folders, regular
/// files only, within the file and entry bounds.
fn grep_tree(
    st: &mut GrepState,
    root: PathBuf,
    base: PathBuf,
    cancel: &Cancel,
) -> Result<(), &'static str> {
    // (absolute path, shown path, is a folder)
    let mut stack: Vec<(PathBuf, PathBuf, bool)> = vec![(root, base, true)];
    let mut seen = 0usize;
    let mut files = 0usize;
    while let Some((abs, shown, is_dir)) = stack.pop() {
        if cancel.is_cancelled() {
            return Err("cancelled");
        }
        if !is_dir {
            files += 1;
            if files > GREP_FILES {
                st.truncated = true;
                return Ok(());
            }
            if !st.search(&abs, &shown) {
                return Ok(());
            }
            continue;
        }
        let Ok(entries) = fs::read_dir(&abs) else {
            continue;
        };
        let mut children: Vec<(OsString, bool)> = Vec::new();
        for entry in entries {
            seen += 1;
            if seen > GREP_ENTRIES {
                st.truncated = true;
                break;
            }
            let Ok(entry) = entry else { continue };
            let Ok(ft) = entry.file_type() else { continue };
            let name = entry.file_name();
            if ft.is_dir() {
                if name != ".git" && name != "target" {
                    children.push((name, true));
                }
            } else if ft.is_file() {
                children.push((name, false));
            }
            // Symlinks, FIFOs, sockets and devices are skipped.
        }
        children.sort();
        for (name, child_is_dir) in children.into_iter().rev() {
            stack.push((abs.join(&name), shown.join(&name), child_is_dir));
        }
        if st.truncated {
            // The entry bound was hit: search what is already queued, read no more folders.
            stack.retain(|(_, _, d)| !d);
        }
    }
    Ok(())
}
