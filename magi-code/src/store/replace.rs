//! Atomic replacement of rewritten files, the folder fsync that makes a new name durable, and
//! the sweep of the stale temp files that a replacement killed part way leaves behind.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Fsyncs a folder so a new entry in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Which stale temp files a replacement removes from its folder before it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Only the leftovers of the file being replaced (a user's folder: nothing else is touched).
    Beside,
    /// Every leftover of ours in the folder (a folder the backend owns, such as `cache/models`).
    Folder,
}

/// A temp file younger than this is never swept, even unlocked: its writer may be between
/// creating and locking it.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// Most folder entries one sweep looks at, so a huge folder costs a write little.
pub const SWEEP_ENTRIES: usize = 10_000;

/// Longest part of the target's name embedded in a temp name: the temp name stays within
/// `NAME_MAX` (255 bytes) with the tag, 32 hex digits and the suffix.
const NAME_PREFIX_BYTES: usize = 200;
const TAG: &[u8] = b".magi-";
const SUFFIX: &[u8] = b".tmp";
const HEX: usize = 32;

/// The temp-name head for a target named `name`: `.` and the name (cut to
/// [`NAME_PREFIX_BYTES`]), so `.foo.rs.magi-<32 hex>.tmp` is recognisably the temp of `foo.rs`.
fn head_for(name: &OsStr) -> Vec<u8> {
    let b = name.as_bytes();
    let mut head = Vec::with_capacity(NAME_PREFIX_BYTES + 1);
    head.push(b'.');
    head.extend_from_slice(&b[..b.len().min(NAME_PREFIX_BYTES)]);
    head
}

/// The head of `name` when it is one of our temp names (`<head>.magi-<32 hex>.tmp`), else
/// `None`. The head is empty for the older `.magi-<hex>.tmp` form.
fn temp_head(name: &[u8]) -> Option<&[u8]> {
    let rest = name.strip_suffix(SUFFIX)?;
    let (rest, hex) = rest.split_at(rest.len().checked_sub(HEX)?);
    if !hex.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    rest.strip_suffix(TAG)
}

/// Whether `name` is a temp file that `sweep` may remove when replacing a file named `target`.
fn swept(name: &[u8], target: &OsStr, sweep: Sweep) -> bool {
    match (temp_head(name), sweep) {
        (Some(head), Sweep::Beside) => head == head_for(target).as_slice(),
        (Some(head), Sweep::Folder) => head.is_empty() || (head.len() > 1 && head[0] == b'.'),
        (None, _) => false,
    }
}

/// Takes the exclusive lock on `file` without waiting; false when another holds it.
fn try_lock(file: &File) -> bool {
    file.try_lock().is_ok()
}

/// Removes `path` if it is a regular file older than [`STALE_AFTER`] that no live writer
/// holds locked (a writer holds its temp file's lock until it has renamed it).
fn remove_if_stale(path: &Path, now: SystemTime) {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        return;
    };
    let old = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| m.modified().ok().and_then(|t| now.duration_since(t).ok()));
    if old.is_some_and(|age| age >= STALE_AFTER) && try_lock(&file) {
        let _ = fs::remove_file(path);
    }
}

/// Removes the stale temp files `sweep` names from `dir` (best effort: a failure to look or
/// remove never fails the write).
pub fn sweep_stale(dir: &Path, target: &OsStr, sweep: Sweep) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.take(SWEEP_ENTRIES).flatten() {
        let name = entry.file_name();
        if swept(name.as_bytes(), target, sweep) {
            remove_if_stale(&entry.path(), now);
        }
    }
}

/// Writes `data` to a new temp file beside `target` in `dir`, after sweeping the stale temp
/// files `sweep` names: created without following a symlink, locked while it lives, at `mode`
/// (`None`: `0o666` less the umask), fsync'd. On an error it is removed again.
fn write_temp(
    dir: &Path,
    target: &OsStr,
    data: &[u8],
    mode: Option<u32>,
    sweep: Sweep,
) -> io::Result<(PathBuf, File)> {
    write_temp_with(dir, target, data, mode, sweep, true)
}

/// [`write_temp`], fsynced only when `sync`.
fn write_temp_with(
    dir: &Path,
    target: &OsStr,
    data: &[u8],
    mode: Option<u32>,
    sweep: Sweep,
    sync: bool,
) -> io::Result<(PathBuf, File)> {
    sweep_stale(dir, target, sweep);
    let mut name = head_for(target);
    name.extend_from_slice(TAG);
    name.extend_from_slice(uuid::Uuid::new_v4().simple().to_string().as_bytes());
    name.extend_from_slice(SUFFIX);
    let tmp = dir.join(OsStr::from_bytes(&name));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if mode.is_some() { 0o600 } else { 0o666 })
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    // A fresh file: nobody else can hold it. The lock tells a sweep that we are alive.
    try_lock(&file);
    let written = file
        .write_all(data)
        .and_then(|()| match mode {
            Some(m) => file.set_permissions(Permissions::from_mode(m)),
            None => Ok(()),
        })
        .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
    match written {
        Ok(()) => Ok((tmp, file)),
        Err(e) => {
            drop(file);
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// After a crash between a temp file's write and its rename, adopts the newest leftover temp
/// of `path` (our `Sweep::Beside` naming) that no live writer holds, is at most `limit` bytes,
/// is newer than `path` (or `path` is missing) and that `complete` accepts: it is renamed over
/// `path` and the folder synced. The caller holds the lock under which `path` is written, so
/// no writer of its own is between write and rename. Whether one was adopted.
///
/// # Errors
/// When the rename fails (`path` is then unchanged).
pub fn adopt_leftover(
    path: &Path,
    limit: u64,
    complete: impl Fn(&[u8]) -> bool,
) -> io::Result<bool> {
    let (dir, target) = split(path)?;
    let current = fs::symlink_metadata(path).and_then(|m| m.modified()).ok();
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(false);
    };
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in entries.take(SWEEP_ENTRIES).flatten() {
        let name = entry.file_name();
        if !swept(name.as_bytes(), target, Sweep::Beside) {
            continue;
        }
        let tmp = entry.path();
        let Some(at) = leftover(&tmp, limit, &complete) else {
            continue;
        };
        let newer = current.is_none_or(|c| at > c);
        if newer && best.as_ref().is_none_or(|(b, _)| at > *b) {
            best = Some((at, tmp));
        }
    }
    let Some((_, tmp)) = best else {
        return Ok(false);
    };
    fs::rename(&tmp, path)?;
    // Renamed: a failed folder sync only weakens durability, as in `replace_atomically`.
    drop(sync_dir(dir));
    Ok(true)
}

/// A temp file's modification time when no live writer holds it and `complete` accepts its
/// (bounded) content.
fn leftover(tmp: &Path, limit: u64, complete: &impl Fn(&[u8]) -> bool) -> Option<SystemTime> {
    use std::io::Read as _;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(tmp)
        .ok()?;
    let meta = file
        .metadata()
        .ok()
        .filter(|m| m.is_file() && m.len() <= limit)?;
    // A writer holds its temp file's lock until it has renamed it: one held is not left over.
    if !try_lock(&file) {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).ok()?;
    (complete(&bytes)).then_some(())?;
    meta.modified().ok()
}

/// The folder and the file name of `path`.
fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(io::ErrorKind::InvalidInput.into()),
    }
}

/// Replaces `path` atomically with `data`: first the stale temp files `sweep` names are
/// removed, then a temp file in the same folder (never following a symlink, locked while it
/// lives), fsync, rename over `path`, then an fsync of the folder. `mode` sets the file's
/// permissions; `None` leaves a new file's default (`0o666` less the umask). `Ok(synced)`
/// once renamed, where `synced` says whether the folder fsync succeeded too; on an error the
/// temp file is removed and `path` is untouched.
pub fn replace_atomically(
    path: &Path,
    data: &[u8],
    mode: Option<u32>,
    sweep: Sweep,
) -> io::Result<bool> {
    let (dir, target) = split(path)?;
    let (tmp, file) = write_temp(dir, target, data, mode, sweep)?;
    let renamed = fs::rename(&tmp, path);
    drop(file);
    if let Err(e) = renamed {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(sync_dir(dir).is_ok())
}

/// Replaces `path` atomically with `data` at `mode` as [`replace_atomically`] does, but
/// without any fsync: for derived files that may be lost or stale after a crash, never torn
/// (`decisions.md` 50: derived metadata is "never fsynced for durability").
pub fn replace_unsynced(path: &Path, data: &[u8], mode: u32, sweep: Sweep) -> io::Result<()> {
    let (dir, target) = split(path)?;
    let (tmp, file) = write_temp_with(dir, target, data, Some(mode), sweep, false)?;
    let renamed = fs::rename(&tmp, path);
    drop(file);
    if let Err(e) = renamed {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// Creates `path` holding `data` at `mode`, only if no name is there (`AlreadyExists`), so
/// that the name never shows less than the whole content: a temp file as for
/// [`replace_atomically`], a hard link to `path`, then a folder fsync. On any error nothing
/// is left at `path` by this call (a failed folder fsync removes the new name again).
pub fn create_atomically(path: &Path, data: &[u8], mode: u32, sweep: Sweep) -> io::Result<()> {
    let (dir, target) = split(path)?;
    let (tmp, file) = write_temp(dir, target, data, Some(mode), sweep)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    drop(file);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
        // A file system without hard links: create in place, removed again on a failure.
        Err(_) => create_in_place(path, data, mode)?,
    }
    if let Err(e) = sync_dir(dir) {
        let _ = fs::remove_file(path);
        return Err(e);
    }
    Ok(())
}

/// [`create_atomically`] where hard links fail: `O_EXCL`, write, fsync; a failed write removes
/// the file (only a kill part way can leave less than `data`).
fn create_in_place(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let written = file.write_all(data).and_then(|()| file.sync_all());
    if written.is_err() {
        drop(file);
        let _ = fs::remove_file(path);
    }
    written
}

#[cfg(test)]
mod tests;
