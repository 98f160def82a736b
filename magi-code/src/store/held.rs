//! Held-file reads: one open without following symlinks or blocking on FIFOs, bounded bytes
//! and lines, and an identity check so a replaced or mutated file is refused.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Why a held read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// No such file.
    Missing,
    /// A symlink, FIFO, device, folder, or a file that changed identity or is unreadable.
    Unsafe,
    /// Over the byte or line budget.
    TooLarge,
}

/// Identity of a file, for detecting replacement and mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub len: u64,
    /// Modification time (ns).
    pub mtime_ns: i128,
    /// Mode bits.
    pub mode: u32,
}

impl Identity {
    /// The identity in `m`.
    pub(crate) fn of(m: &fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            mode: m.mode(),
        }
    }
}

/// A file read through one held descriptor.
#[derive(Debug, Clone)]
pub struct Held {
    /// The bytes read (at most the budget).
    pub bytes: Vec<u8>,
    /// The file's identity when the read finished.
    pub identity: Identity,
}

/// Opens `path` once without following symlinks and without blocking on FIFOs, and requires a
/// regular file within `max_bytes`.
fn open_held(path: &Path, max_bytes: u64) -> Result<(File, fs::Metadata), ReadError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ReadError::Missing,
            _ => ReadError::Unsafe,
        })?;
    let before = file.metadata().map_err(|_| ReadError::Unsafe)?;
    if !before.file_type().is_file() {
        return Err(ReadError::Unsafe);
    }
    if before.len() > max_bytes {
        return Err(ReadError::TooLarge);
    }
    Ok((file, before))
}

/// The file's identity after a read of `read` bytes, if it did not change during the read and
/// its name still leads to it.
fn unchanged(
    path: &Path,
    file: &File,
    before: fs::Metadata,
    read: u64,
) -> Result<Identity, ReadError> {
    let after = Identity::of(&file.metadata().map_err(|_| ReadError::Unsafe)?);
    let named = fs::symlink_metadata(path).map_err(|_| ReadError::Unsafe)?;
    if Identity::of(&before) != after
        || after.len != read
        || named.dev() != after.dev
        || named.ino() != after.ino
    {
        return Err(ReadError::Unsafe);
    }
    Ok(after)
}

/// What a streamed held read saw.
#[derive(Debug, Clone, Copy)]
pub struct Streamed {
    /// The file's identity when the read finished (checked unchanged).
    pub identity: Identity,
    /// Whether the file ended in a line without LF (an interrupted append; not passed on).
    pub torn: bool,
    /// Bytes read.
    pub bytes: u64,
    /// Complete lines read.
    pub lines: usize,
}

/// Opens `path` once without following symlinks and without blocking on FIFOs, requires a
/// regular file, and streams its complete lines (LF excluded) to `on_line` with bounded
/// memory: at most `max_bytes` and `max_lines` are read (one more byte only to detect
/// excess), and no line over `max_line` bytes is buffered. The file must keep its identity
/// during the read. `on_line` returning false stops the read: `Ok(None)`.
pub fn stream_held(
    path: &Path,
    max_bytes: u64,
    max_lines: usize,
    max_line: usize,
    on_line: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<Option<Streamed>, ReadError> {
    let (file, before) = open_held(path, max_bytes)?;
    let mut reader = io::BufReader::with_capacity(64 * 1024, (&file).take(max_bytes + 1));
    let mut line = Vec::new();
    let (mut bytes, mut lines, mut torn) = (0u64, 0usize, false);
    loop {
        line.clear();
        let mut done = false;
        loop {
            let buf = reader.fill_buf().map_err(|_| ReadError::Unsafe)?;
            if buf.is_empty() {
                break;
            }
            let (take, found) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if line.len() + take > max_line + 1 {
                return Err(ReadError::TooLarge);
            }
            line.extend_from_slice(&buf[..take]);
            reader.consume(take);
            if found {
                done = true;
                break;
            }
        }
        if line.is_empty() {
            break;
        }
        bytes += line.len() as u64;
        if bytes > max_bytes {
            return Err(ReadError::TooLarge);
        }
        if !done {
            torn = true;
            break;
        }
        lines += 1;
        if lines > max_lines {
            return Err(ReadError::TooLarge);
        }
        if !on_line(&line[..line.len() - 1]) {
            return Ok(None);
        }
    }
    let b = unchanged(path, &file, before, bytes)?;
    Ok(Some(Streamed {
        identity: b,
        torn,
        bytes,
        lines,
    }))
}

/// Reads a whole small file under the same rules as [`stream_held`] (one open without
/// following symlinks, a regular file, at most `max_bytes` and `max_lines`, unchanged identity),
/// including a last line without LF.
pub fn read_held(path: &Path, max_bytes: u64, max_lines: usize) -> Result<Held, ReadError> {
    let (file, before) = open_held(path, max_bytes)?;
    let mut bytes = Vec::with_capacity(usize::try_from(before.len()).unwrap_or(0));
    (&file)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| ReadError::Unsafe)?;
    if bytes.len() as u64 > max_bytes || memchr::memchr_iter(b'\n', &bytes).count() > max_lines {
        return Err(ReadError::TooLarge);
    }
    let identity = unchanged(path, &file, before, bytes.len() as u64)?;
    Ok(Held { bytes, identity })
}

/// A regular file held open (one open, no symlink followed, never blocking on a FIFO) for
/// positional reads of parts of it: a read window from its end, its first record.
#[derive(Debug)]
pub struct HeldFile {
    file: File,
    before: fs::Metadata,
    path: std::path::PathBuf,
}

impl HeldFile {
    /// Opens `path` as [`stream_held`] does, whatever its length.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let (file, before) = open_held(path, u64::MAX)?;
        Ok(Self {
            file,
            before,
            path: path.to_owned(),
        })
    }

    /// Its length when opened.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.before.len()
    }

    /// Its device and inode.
    #[must_use]
    pub fn dev_ino(&self) -> (u64, u64) {
        (self.before.dev(), self.before.ino())
    }

    /// Whether it was empty when opened.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` from `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        use std::os::unix::fs::FileExt;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|_| ReadError::Unsafe)
    }

    /// Streams the lines of `[start, end)` (LF excluded; `end` just after an LF) to
    /// `on_line`, read in blocks of 1 MiB and handed over without a copy per line; false
    /// from it stops the read (`Ok(false)`).
    pub fn lines(
        &self,
        start: u64,
        end: u64,
        on_line: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, ReadError> {
        const BLOCK: usize = 1 << 20;
        let mut buf: Vec<u8> = Vec::new();
        // `buf[..held]` holds the start of a line not yet whole.
        let mut held = 0usize;
        let mut at = start;
        while at < end {
            let want = usize::try_from((end - at).min(BLOCK as u64)).unwrap_or(BLOCK);
            if buf.len() < held + want {
                buf.resize(held + want, 0);
            }
            self.read_at(at, &mut buf[held..held + want])?;
            at += want as u64;
            let filled = held + want;
            let mut from = 0usize;
            while let Some(i) = memchr::memchr(b'\n', &buf[from..filled]) {
                if !on_line(&buf[from..from + i]) {
                    return Ok(false);
                }
                from += i + 1;
            }
            buf.copy_within(from..filled, 0);
            held = filled - from;
        }
        if held > 0 {
            // The file changed under the read: `end` was just after an LF.
            return Err(ReadError::Unsafe);
        }
        Ok(true)
    }

    /// The file's identity, if it did not change since it was opened and its name still
    /// leads to it.
    pub fn finish(self) -> Result<Identity, ReadError> {
        let len = self.before.len();
        unchanged(&self.path, &self.file, self.before, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_reads_refuse_unsafe_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.jsonl");
        fs::write(&f, b"{}\n").unwrap();
        assert_eq!(read_held(&f, 100, 10).unwrap().bytes, b"{}\n");
        assert_eq!(read_held(&f, 2, 10).unwrap_err(), ReadError::TooLarge);
        assert_eq!(read_held(&f, 100, 0).unwrap_err(), ReadError::TooLarge);
        std::os::unix::fs::symlink(&f, d.path().join("l.jsonl")).unwrap();
        assert_eq!(
            read_held(&d.path().join("l.jsonl"), 100, 10).unwrap_err(),
            ReadError::Unsafe
        );
        assert_eq!(
            read_held(&d.path().join("none"), 100, 10).unwrap_err(),
            ReadError::Missing
        );
        let fifo = d.path().join("x.jsonl");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert_eq!(read_held(&fifo, 100, 10).unwrap_err(), ReadError::Unsafe);
        assert_eq!(read_held(d.path(), 100, 10).unwrap_err(), ReadError::Unsafe);
    }
}
