//! `write_file` (creating missing parent folders) and `edit_file` (atomic replacement).

use super::input::{
    invalid, io_phrase, open_regular, read_bounded, EditFileIn, WriteFileIn, FILE_BYTES,
};
use crate::store::replace_atomically;
use crate::tools::outcome::ToolOutcome;
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub(crate) fn write_file(i: WriteFileIn, cwd: &Path) -> ToolOutcome {
    if i.content.len() as u64 > FILE_BYTES {
        return ToolOutcome::fail("too large");
    }
    let path = cwd.join(&i.path);
    // Decision 31: missing parent folders are created (with the process umask).
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        match fs::create_dir_all(parent) {
            Ok(()) => {}
            // A file stands where a folder should be.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::NotADirectory | ErrorKind::AlreadyExists
                ) =>
            {
                return ToolOutcome::fail("not a folder")
            }
            Err(e) => return ToolOutcome::fail(io_phrase(&e)),
        }
    }
    // Not O_TRUNC: nothing is cut before the target is known to be a regular file, and
    // O_NONBLOCK makes a FIFO without a reader fail (ENXIO) instead of hanging.
    let opened = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => return ToolOutcome::fail("not a file"),
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    }
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| file.write_all(i.content.as_bytes()))
    {
        return ToolOutcome::fail(io_phrase(&e));
    }
    let n = i.content.len();
    ToolOutcome::success(
        format!("wrote {n} bytes"),
        format!("wrote {n} bytes"),
        false,
    )
}

pub(crate) fn edit_file(i: EditFileIn, cwd: &Path) -> ToolOutcome {
    if i.old.is_empty() {
        return invalid("old must not be empty");
    }
    // Edit the symlink's target, not the link: the rename replaces `real`.
    let real = match fs::canonicalize(cwd.join(&i.path)) {
        Ok(p) => p,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let file = match open_regular(&real) {
        Ok(f) => f,
        Err(p) => return ToolOutcome::fail(p),
    };
    let mode = match file.metadata() {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let hay = match read_bounded(file, FILE_BYTES) {
        Ok((_, true)) => return ToolOutcome::fail("too large"),
        Ok((buf, false)) => buf,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let old = i.old.as_bytes();
    let Some(at) = memchr::memmem::find(&hay, old) else {
        return ToolOutcome::fail("old text not found");
    };
    // Overlapping occurrences count too: "aa" is not unique in "aaa".
    if memchr::memmem::find(&hay[at + 1..], old).is_some() {
        return ToolOutcome::fail("old text not unique");
    }
    let mut edited = Vec::with_capacity(hay.len() - old.len() + i.new.len());
    edited.extend_from_slice(&hay[..at]);
    edited.extend_from_slice(i.new.as_bytes());
    edited.extend_from_slice(&hay[at + old.len()..]);
    if edited.len() as u64 > FILE_BYTES {
        return ToolOutcome::fail("too large");
    }
    match replace_atomically(&real, &edited, mode) {
        // The folder fsync is best effort here: the edit itself is in place.
        Ok(_synced) => ToolOutcome::success("edited".to_owned(), "edited".to_owned(), false),
        Err(e) => ToolOutcome::fail(io_phrase(&e)),
    }
}
