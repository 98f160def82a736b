//! `grep`: a Rust regex over each line of the files a search sees (`walk.rs`), with ripgrep's
//! own searcher: binary files (a NUL byte, as ripgrep detects it) left out of a walk; matches
//! sorted by printed path, then line; the first [`GREP_MATCHES`], then a line saying how many
//! more matched.

use super::input::{io_phrase, GrepIn, GREP_MATCHES};
use super::walk::{self, Pattern, Root};
use crate::tools::outcome::{bound_parts, ToolDetails, ToolOutcome, HALF_BYTES, OUTPUT_BYTES};
use crate::util::cancel::Cancel;
use crate::util::proc::Capture;
use crate::util::text::cut;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// The most a searched line may hold in memory: a longer one ends that file's search, which
/// the output then counts as not searched.
const LINE_HEAP: usize = 64 << 20;

/// One file's matches, as the searcher reports them.
struct FileSink<'c> {
    /// Line number and text of the first [`GREP_MATCHES`] matching lines.
    kept: Vec<(u64, String)>,
    /// Every matching line.
    count: u64,
    /// Where a NUL byte was found, if one was.
    binary: Option<u64>,
    cancel: &'c Cancel,
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        if self.kept.len() < GREP_MATCHES {
            let bytes = m.bytes();
            let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
            let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
            // Bounded: the whole output is at most OUTPUT_BYTES anyway.
            let text = cut(&String::from_utf8_lossy(bytes), OUTPUT_BYTES).to_owned();
            self.kept.push((m.line_number().unwrap_or(0), text));
        }
        Ok(!self.cancel.is_cancelled())
    }

    fn binary_data(&mut self, _: &Searcher, offset: u64) -> Result<bool, io::Error> {
        self.binary = Some(offset);
        Ok(false)
    }
}

/// What a search found: the first matches in printed-path order, and counts.
#[derive(Default)]
struct Found {
    kept: BTreeMap<String, Vec<(u64, String)>>,
    kept_n: usize,
    total: u64,
    /// Files that could not be searched (unreadable, or a line over [`LINE_HEAP`]).
    unsearched: usize,
}

impl Found {
    /// Adds one file's matches, keeping only the first [`GREP_MATCHES`] of all in order.
    fn add(&mut self, shown: String, sink: FileSink<'_>) {
        self.total += sink.count;
        if sink.kept.is_empty() {
            return;
        }
        self.kept_n += sink.kept.len();
        self.kept.insert(shown, sink.kept);
        while self.kept_n > GREP_MATCHES {
            let Some(mut last) = self.kept.last_entry() else {
                break;
            };
            last.get_mut().pop();
            self.kept_n -= 1;
            if last.get().is_empty() {
                last.remove();
            }
        }
    }
}

/// Searches one file; `Err` when it could not be read.
fn search<'c>(matcher: &RegexMatcher, path: &Path, cancel: &'c Cancel) -> io::Result<FileSink<'c>> {
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .heap_limit(Some(LINE_HEAP))
        .build();
    let mut sink = FileSink {
        kept: Vec::new(),
        count: 0,
        binary: None,
        cancel,
    };
    searcher.search_path(matcher, path, &mut sink)?;
    Ok(sink)
}

pub(crate) fn grep(i: GrepIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(i.case_insensitive.unwrap_or(false))
        .build(&i.pattern)
    {
        Ok(m) => m,
        Err(e) => return ToolOutcome::fail_with("invalid pattern", &e.to_string()),
    };
    let only = match i.glob.as_deref().map(Pattern::new).transpose() {
        Ok(p) => p,
        Err(e) => return ToolOutcome::fail_with("invalid glob", &e),
    };
    let root = Root::new(cwd, i.path.as_deref());
    let meta = match fs::metadata(&root.abs) {
        Ok(m) => m,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let found = Mutex::new(Found::default());
    let mut notes = Vec::new();
    if meta.is_file() {
        // The file named is searched whatever it is, up to a NUL byte if it holds one.
        let sink = match search(&matcher, &root.abs, cancel) {
            Ok(s) => s,
            Err(e) => return ToolOutcome::fail(io_phrase(&e)),
        };
        if let Some(at) = sink.binary {
            notes.push((
                "binary file: searched up to its first NUL byte".to_owned(),
                format!("[binary file: a NUL byte at byte {at}, not searched from there]"),
            ));
        }
        lock(&found).add(root.show(&root.abs), sink);
    } else if meta.is_dir() {
        walk::files(&root.abs, cancel, &|path| {
            if only.as_ref().is_some_and(|p| !p.matches(&root.abs, path)) {
                return true;
            }
            match search(&matcher, path, cancel) {
                // A binary file is left out of a walk, whatever matched before its NUL.
                Ok(sink) if sink.binary.is_some() => {}
                Ok(sink) => lock(&found).add(root.show(path), sink),
                Err(_) => lock(&found).unsearched += 1,
            }
            true
        });
    } else {
        return ToolOutcome::fail("not a file");
    }
    if cancel.is_cancelled() {
        return ToolOutcome::fail("cancelled");
    }
    let found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    if found.unsearched > 0 {
        let n = found.unsearched;
        notes.push((
            format!("{n} files not searched"),
            format!("[{n} files could not be searched: unreadable, or a line over 64 MiB]"),
        ));
    }
    outcome(&found, &notes)
}

/// The tool's result: notes first (a search that left something out says so), then the kept
/// matches, then how many more matched.
fn outcome(found: &Found, notes: &[(String, String)]) -> ToolOutcome {
    let mut out = Capture::new(OUTPUT_BYTES, HALF_BYTES);
    let mut summary = format!("{} matches", found.total);
    for (short, line) in notes {
        summary = format!("{summary}; {short}");
        out.push(format!("{line}\n").as_bytes());
    }
    for (path, lines) in &found.kept {
        for (n, text) in lines {
            out.push(format!("{path}:{n}:{text}\n").as_bytes());
        }
    }
    let more = found.total.saturating_sub(found.kept_n as u64);
    if more > 0 {
        out.push(format!("[{more} more matches left out]\n").as_bytes());
    }
    let parts = out.parts();
    let output = bound_parts(&parts.head, parts.dropped, &parts.tail, false);
    let matches = found.total;
    ToolOutcome::success(summary, output, false).with(ToolDetails::Search { matches })
}

fn lock(found: &Mutex<Found>) -> std::sync::MutexGuard<'_, Found> {
    found.lock().unwrap_or_else(PoisonError::into_inner)
}
