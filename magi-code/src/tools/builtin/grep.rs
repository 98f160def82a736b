//! `grep`: a regex over a bounded walk of the tree.

use super::input::{
    io_phrase, open_regular, read_bounded, GrepIn, GREP_ENTRIES, GREP_FILES, GREP_FILE_BYTES,
    GREP_MATCHES, GREP_NAMED_BYTES,
};
use crate::tools::outcome::{bound_parts, ToolDetails, ToolOutcome, HALF_BYTES, OUTPUT_BYTES};
use crate::util::cancel::Cancel;
use crate::util::proc::Capture;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

/// What `grep` found so far.
struct GrepState {
    re: regex::Regex,
    out: Capture,
    matches: usize,
    truncated: bool,
    /// Files of a walk left out for being over [`GREP_FILE_BYTES`].
    skipped_big: usize,
}

/// Why a named file was not searched to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// Searched to its end (or to the match bound).
    No,
    /// It holds a NUL byte (a binary file), at this line.
    Binary(usize),
    /// Only its first [`GREP_NAMED_BYTES`] were searched.
    Capped,
    /// It could not be opened or read (a fixed phrase).
    Unreadable(&'static str),
}

impl GrepState {
    /// Matches one line; false once the match bound is reached.
    fn line(&mut self, display: &str, number: usize, line: &str) -> bool {
        if !self.re.is_match(line) {
            return true;
        }
        if self.matches == GREP_MATCHES {
            self.truncated = true;
            return false;
        }
        self.matches += 1;
        self.out
            .push(format!("{display}:{number}:{line}\n").as_bytes());
        true
    }

    /// Searches one file of a walk; false once the match bound is reached. Files over
    /// [`GREP_FILE_BYTES`] are counted in `skipped_big`; binary and unreadable ones are skipped.
    fn search(&mut self, abs: &Path, display: &Path) -> bool {
        let Ok(file) = open_regular(abs) else {
            return true;
        };
        let Ok(meta) = file.metadata() else {
            return true;
        };
        if meta.len() > GREP_FILE_BYTES {
            self.skipped_big += 1;
            return true;
        }
        let Ok((buf, over)) = read_bounded(file, GREP_FILE_BYTES) else {
            return true;
        };
        if over {
            // It grew past the bound while being read.
            self.skipped_big += 1;
            return true;
        }
        if memchr::memchr(0, &buf).is_some() {
            return true;
        }
        let text = String::from_utf8_lossy(&buf);
        let display = display.to_string_lossy();
        for (k, line) in text.lines().enumerate() {
            if !self.line(&display, k + 1, line) {
                return false;
            }
        }
        true
    }

    /// Searches the file `path` names, streaming it line by line whatever its size, up to
    /// [`GREP_NAMED_BYTES`]; a line over [`GREP_FILE_BYTES`] is matched on its first
    /// [`GREP_FILE_BYTES`]. Stops at the first NUL byte (a binary file).
    fn search_named(&mut self, abs: &Path, display: &Path, cancel: &Cancel) -> Stopped {
        let file = match open_regular(abs) {
            Ok(f) => f,
            Err(phrase) => return Stopped::Unreadable(phrase),
        };
        let capped = file.metadata().is_ok_and(|m| m.len() > GREP_NAMED_BYTES);
        let display = display.to_string_lossy();
        let mut r = BufReader::with_capacity(64 << 10, file.take(GREP_NAMED_BYTES));
        let mut buf = Vec::new();
        let mut number = 0usize;
        loop {
            if number.is_multiple_of(1024) && cancel.is_cancelled() {
                return Stopped::No;
            }
            buf.clear();
            let Ok(n) = (&mut r).take(GREP_FILE_BYTES).read_until(b'\n', &mut buf) else {
                return Stopped::Unreadable("i/o error");
            };
            if n == 0 {
                return if capped { Stopped::Capped } else { Stopped::No };
            }
            number += 1;
            if buf.last() != Some(&b'\n') && r.skip_until(b'\n').is_err() {
                return Stopped::Unreadable("i/o error");
            }
            if memchr::memchr(0, &buf).is_some() {
                return Stopped::Binary(number);
            }
            let line = String::from_utf8_lossy(&buf);
            let line = line.strip_suffix('\n').unwrap_or(&line);
            let line = line.strip_suffix('\r').unwrap_or(line);
            if !self.line(&display, number, line) {
                return Stopped::No;
            }
        }
    }
}

/// Files, with the plural when needed.
fn files(n: usize) -> String {
    if n == 1 {
        "1 file".to_owned()
    } else {
        format!("{n} files")
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
        skipped_big: 0,
    };
    // A search that left something out says so, first in the output and in the summary: a
    // silent `0 matches` would read as "not there".
    let note = if meta.is_file() {
        match st.search_named(&root, &base, cancel) {
            Stopped::No => None,
            Stopped::Binary(line) => Some((
                format!("binary file: stopped at line {line}"),
                format!("[binary file (a NUL byte at line {line}): not searched from there]"),
            )),
            Stopped::Capped => Some((
                format!("only the first {} MiB searched", GREP_NAMED_BYTES >> 20),
                format!(
                    "[only the first {} MiB of the file were searched]",
                    GREP_NAMED_BYTES >> 20
                ),
            )),
            Stopped::Unreadable(phrase) => return ToolOutcome::fail(phrase),
        }
    } else if meta.is_dir() {
        if let Err(p) = grep_tree(&mut st, root, base, cancel) {
            return ToolOutcome::fail(p);
        }
        (st.skipped_big > 0).then(|| {
            let n = files(st.skipped_big);
            let mib = GREP_FILE_BYTES >> 20;
            (
                format!("{n} over {mib} MiB skipped"),
                format!("[{n} over {mib} MiB not searched: name one as path to search it]"),
            )
        })
    } else {
        return ToolOutcome::fail("not a file");
    };
    if cancel.is_cancelled() {
        return ToolOutcome::fail("cancelled");
    }
    let mut summary = format!("{} matches", st.matches);
    let found = st.out.parts();
    let head = match note {
        Some((short, line)) => {
            summary = format!("{summary}; {short}");
            format!("{line}\n{}", found.head)
        }
        None => found.head,
    };
    let output = bound_parts(&head, found.dropped, &found.tail, st.truncated);
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
