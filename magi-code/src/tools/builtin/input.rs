//! Tool inputs (decision 17), validated exactly, the bounds of the built-in tools, and the
//! file helpers they share.

use crate::tools::outcome::ToolOutcome;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Largest file read by `read_file`/`edit_file`, and largest content written.
pub const FILE_BYTES: u64 = 8 << 20;
/// Lines `read_file` returns by default.
pub const READ_LIMIT_DEFAULT: u64 = 2_000;
/// Most lines `read_file` returns.
pub const READ_LIMIT_MAX: u64 = 10_000;
/// Most entries `list_dir` returns.
pub const LIST_ENTRIES: usize = 1_000;
/// Most matches `grep` shows.
pub const GREP_MATCHES: usize = 500;
/// Most paths `glob` shows.
pub const GLOB_PATHS: usize = 1_000;
/// `shell` timeout when none is given.
pub const SHELL_TIMEOUT_DEFAULT_MS: u64 = 30_000;
/// Longest `shell` timeout.
pub const SHELL_TIMEOUT_MAX_MS: u64 = 600_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadFileIn {
    pub(crate) path: String,
    #[serde(default, deserialize_with = "present")]
    pub(crate) offset: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDirIn {
    pub(crate) path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepIn {
    pub(crate) pattern: String,
    #[serde(default, deserialize_with = "present")]
    pub(crate) path: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) glob: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) case_insensitive: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApplyPatchIn {
    pub(crate) patch: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobIn {
    pub(crate) pattern: String,
    #[serde(default, deserialize_with = "present")]
    pub(crate) path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteFileIn {
    pub(crate) path: String,
    pub(crate) content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditFileIn {
    pub(crate) path: String,
    pub(crate) old: String,
    pub(crate) new: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShellIn {
    pub(crate) command: String,
    #[serde(default, deserialize_with = "present")]
    pub(crate) timeout_ms: Option<u64>,
}

/// An optional field that, when present, must have its type: an explicit `null` is refused.
pub(crate) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Parses a tool input; only a JSON object is accepted (serde would also take an array).
pub(crate) fn parse<'a, T: Deserialize<'a>>(input: &'a Value) -> Result<T, String> {
    if !input.is_object() {
        return Err("expected a JSON object".to_owned());
    }
    T::deserialize(input).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Display helpers.

pub(crate) fn invalid(detail: &str) -> ToolOutcome {
    ToolOutcome::fail_with("invalid input", detail)
}

/// A fixed phrase for an I/O error: never the OS text, which may carry paths.
pub(crate) fn io_phrase(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => "not found",
        io::ErrorKind::PermissionDenied => "permission denied",
        io::ErrorKind::IsADirectory => "not a file",
        io::ErrorKind::InvalidInput => "invalid path",
        io::ErrorKind::AlreadyExists => "already exists",
        _ if e.raw_os_error() == Some(libc::ENXIO) => "not a file",
        _ if e.raw_os_error() == Some(libc::ELOOP) => "too many symlinks",
        _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => "name too long",
        _ if e.raw_os_error() == Some(libc::ENOSPC) => "no space left",
        _ if e.raw_os_error() == Some(libc::EROFS) => "read-only file system",
        _ => "i/o error",
    }
}

/// Opens a regular file for reading without ever blocking on a FIFO or device.
pub(crate) fn open_regular(path: &Path) -> Result<File, &'static str> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io_phrase(&e))?;
    let meta = file.metadata().map_err(|e| io_phrase(&e))?;
    if meta.is_file() {
        Ok(file)
    } else {
        Err("not a file")
    }
}

/// Reads at most `max` bytes; the flag tells whether more were there.
pub(crate) fn read_bounded(file: File, max: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    let over = buf.len() as u64 > max;
    if over {
        buf.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    }
    Ok((buf, over))
}
