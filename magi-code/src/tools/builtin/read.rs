//! `read_file` and `list_dir`.

use super::input::{
    invalid, io_phrase, open_regular, read_bounded, ListDirIn, ReadFileIn, FILE_BYTES,
    LIST_ENTRIES, READ_LIMIT_DEFAULT, READ_LIMIT_MAX,
};
use crate::tools::outcome::{ToolDetails, ToolOutcome};
use crate::util::cancel::Cancel;
use std::collections::BinaryHeap;
use std::fs;
use std::path::Path;

pub(crate) fn read_file(i: ReadFileIn, cwd: &Path) -> ToolOutcome {
    let limit = i.limit.unwrap_or(READ_LIMIT_DEFAULT);
    if !(1..=READ_LIMIT_MAX).contains(&limit) {
        return invalid("limit must be 1..=10000");
    }
    let offset = usize::try_from(i.offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let file = match open_regular(&cwd.join(&i.path)) {
        Ok(f) => f,
        Err(p) => return ToolOutcome::fail(p),
    };
    let (buf, over) = match read_bounded(file, FILE_BYTES) {
        Ok(r) => r,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let text = String::from_utf8_lossy(&buf);
    let mut pieces = text.split_inclusive('\n');
    if offset > 0 {
        // `nth(offset - 1)` skips `offset` pieces.
        let _ = pieces.nth(offset - 1);
    }
    let mut out = String::new();
    let mut n = 0usize;
    for piece in pieces.by_ref().take(limit) {
        n += 1;
        // The whole selection (at most FILE_BYTES): its end is kept too when it is long.
        out.push_str(piece);
    }
    // The 8 MiB cut matters only when the selection ran into it.
    let truncated = over && pieces.next().is_none();
    ToolOutcome::success(format!("read {n} lines"), out, truncated)
        .with(ToolDetails::FileRead { lines: n as u64 })
}

pub(crate) fn list_dir(i: ListDirIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let path = cwd.join(&i.path);
    match fs::metadata(&path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return ToolOutcome::fail("not a folder"),
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    }
    let entries = match fs::read_dir(&path) {
        Ok(rd) => rd,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    // The smallest LIST_ENTRIES names, kept in a bounded max-heap however big the folder is.
    let mut heap: BinaryHeap<(String, bool)> = BinaryHeap::new();
    let mut total = 0usize;
    for (k, entry) in entries.enumerate() {
        if k % 1024 == 0 && cancel.is_cancelled() {
            return ToolOutcome::fail("cancelled");
        }
        let Ok(entry) = entry else { continue };
        total += 1;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        heap.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
        if heap.len() > LIST_ENTRIES {
            heap.pop();
        }
    }
    let mut out = String::new();
    for (name, is_dir) in heap.into_sorted_vec() {
        out.push_str(&name);
        if is_dir {
            out.push('/');
        }
        out.push('\n');
    }
    ToolOutcome::success(format!("{total} entries"), out, total > LIST_ENTRIES)
}
