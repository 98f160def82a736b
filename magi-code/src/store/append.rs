//! Durable writes: the append-only history appender.

use super::held::Identity;
use super::replace::{create_atomically, Sweep};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `records` as JSON lines, each ended by LF.
fn lines<T: serde::Serialize>(records: &[T]) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    for r in records {
        serde_json::to_writer(&mut buf, r).map_err(io::Error::other)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// An append-only history file held open by its owner.
#[derive(Debug)]
pub struct Appender {
    file: File,
    /// Whether the file may end in a torn line that must be cut before the next append.
    check_tail: bool,
}

impl Appender {
    /// Creates a new history file holding `first` (it must not exist: `AlreadyExists`) and
    /// makes it durable. The name appears only with those whole lines: a failed or killed
    /// create never leaves an empty or torn history (`decisions.md` 23).
    pub fn create<T: serde::Serialize>(path: &Path, first: &[T]) -> io::Result<Self> {
        create_atomically(path, &lines(first)?, 0o600, Sweep::Folder)?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Self {
            file,
            check_tail: false,
        })
    }

    /// Opens an existing history file for appending.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)?;
        if !file.metadata()?.file_type().is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        Ok(Self {
            file,
            check_tail: true,
        })
    }

    /// Fills `buf` from `offset` of the held file.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.read_exact_at(buf, offset)
    }

    /// The identity of the held file now (after our writes, for the snapshot).
    pub fn identity(&self) -> io::Result<Identity> {
        Ok(Identity::of(&self.file.metadata()?))
    }

    /// Cuts a torn last line (no LF) back to the last LF (`decisions.md` 23).
    fn cut_torn_tail(&mut self) -> io::Result<()> {
        let len = self.file.metadata()?.len();
        if len == 0 {
            return Ok(());
        }
        let mut last = [0u8; 1];
        let mut f = &self.file;
        f.seek(SeekFrom::Start(len - 1))?;
        f.read_exact(&mut last)?;
        if last[0] == b'\n' {
            return Ok(());
        }
        // Scan backwards in blocks for the last LF.
        let mut end = len;
        let mut buf = vec![0u8; 64 * 1024];
        let keep = loop {
            let start = end.saturating_sub(buf.len() as u64);
            let n = usize::try_from(end - start).unwrap_or(0);
            f.seek(SeekFrom::Start(start))?;
            f.read_exact(&mut buf[..n])?;
            if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
                break start + i as u64 + 1;
            }
            if start == 0 {
                break 0;
            }
            end = start;
        };
        self.file.set_len(keep)?;
        self.file.sync_data()
    }

    /// Appends records as JSON lines and fsyncs. Nothing is claimed durable on error.
    pub fn append<T: serde::Serialize>(&mut self, records: &[T]) -> io::Result<()> {
        if self.check_tail {
            self.cut_torn_tail()?;
            self.check_tail = false;
        }
        let buf = lines(records)?;
        let res = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        if res.is_err() {
            // A partial line may be left; cut it before the next append.
            self.check_tail = true;
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_full_disk_fails_the_append() {
        let file = OpenOptions::new().append(true).open("/dev/full").unwrap();
        let mut a = Appender {
            file,
            check_tail: false,
        };
        assert!(a.append(&[serde_json::json!({"x":1})]).is_err());
        assert!(a.check_tail, "a partial line is cut before the next append");
    }

    #[test]
    fn torn_tail_is_cut_before_the_next_append() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("s.jsonl");
        fs::write(&f, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut a = Appender::open(&f).unwrap();
        a.append(&[serde_json::json!({"c":3})]).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"{\"a\":1}\n{\"c\":3}\n");
        let g = d.path().join("n.jsonl");
        let mut a = Appender::create(&g, &[serde_json::json!({"m":0})]).unwrap();
        let again = Appender::create(&g, &[serde_json::json!({"m":1})]).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        a.append(&[serde_json::json!({"x":1})]).unwrap();
        assert_eq!(fs::read(&g).unwrap(), b"{\"m\":0}\n{\"x\":1}\n");
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temp file is left: {names:?}");
    }
}
