//! Storage primitives under `MC_HOME/sessions`: paths built only from checked session IDs,
//! safe held-file reads, lease files, durable appends and RFC 3339 timestamps.

use protocol_core::ids::is_session_id;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Stored history read budget: bytes.
pub const HISTORY_READ_BYTES: u64 = 64 << 20;
/// Stored history read budget: lines.
pub const HISTORY_READ_LINES: usize = 100_000;

/// A session ID that passed the grammar; the only way to build a session path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// Checks `[A-Za-z0-9_-]{1,64}`.
    #[must_use]
    pub fn new(s: &str) -> Option<Self> {
        is_session_id(s).then(|| Self(s.to_owned()))
    }

    /// A fresh unguessable ID (122 random bits).
    #[must_use]
    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }

    /// The ID text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lease kinds of `backend.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseKind {
    /// The attached owner.
    Writer,
    /// A run is active.
    Active,
    /// An append is in progress.
    Append,
}

impl LeaseKind {
    /// Every kind.
    pub const ALL: [Self; 3] = [Self::Writer, Self::Active, Self::Append];

    fn suffix(self) -> &'static str {
        match self {
            Self::Writer => "writer",
            Self::Active => "active",
            Self::Append => "append",
        }
    }
}

/// The sessions folder of one storage root.
#[derive(Clone, Debug)]
pub struct Sessions {
    dir: PathBuf,
}

impl Sessions {
    /// `root/sessions`.
    #[must_use]
    pub fn new(root: &Path) -> Self {
        Self {
            dir: root.join("sessions"),
        }
    }

    /// The folder.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the folder is a real directory (not a symlink): histories are read and written
    /// only through one.
    #[must_use]
    pub fn is_safe(&self) -> bool {
        fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_dir())
    }

    /// `sessions/<id>.jsonl`.
    #[must_use]
    pub fn history_path(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{}.jsonl", id.as_str()))
    }

    /// `sessions/<id>.<kind>.lock`.
    #[must_use]
    pub fn lease_path(&self, id: &SessionId, kind: LeaseKind) -> PathBuf {
        self.dir
            .join(format!("{}.{}.lock", id.as_str(), kind.suffix()))
    }

    /// Whether any lease file of `id` exists (advisory presence; never touches the lock).
    #[must_use]
    pub fn lease_present(&self, id: &SessionId) -> bool {
        LeaseKind::ALL
            .iter()
            .any(|k| fs::symlink_metadata(self.lease_path(id, *k)).is_ok())
    }
}

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
    fn of(m: &fs::Metadata) -> Self {
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

/// A held lease: an exclusive `flock` on its lock file. Dropping it deletes the file, then
/// unlocks.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    file: File,
}

/// Why a lease was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseError {
    /// Another process holds it.
    Busy,
    /// The lock file cannot be used safely.
    Unsafe,
}

impl Lease {
    /// Takes the lease without waiting. A stale file left by a crashed owner is not locked and
    /// is taken over.
    pub fn acquire(
        sessions: &Sessions,
        id: &SessionId,
        kind: LeaseKind,
    ) -> Result<Self, LeaseError> {
        let path = sessions.lease_path(id, kind);
        for _ in 0..4 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|_| LeaseError::Unsafe)?;
            let meta = file.metadata().map_err(|_| LeaseError::Unsafe)?;
            if !meta.file_type().is_file() {
                return Err(LeaseError::Unsafe);
            }
            match file.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => return Err(LeaseError::Busy),
                Err(fs::TryLockError::Error(_)) => return Err(LeaseError::Unsafe),
            }
            // The previous owner may have deleted the file between our open and lock: only a
            // lock on the file the name still leads to counts.
            match fs::symlink_metadata(&path) {
                Ok(named) if named.ino() == meta.ino() && named.dev() == meta.dev() => {
                    let mut lease = Self { path, file };
                    let _ = lease.file.set_len(0);
                    let _ = writeln!(lease.file, "{}", std::process::id());
                    return Ok(lease);
                }
                _ => continue,
            }
        }
        Err(LeaseError::Busy)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Fsyncs a folder so a new entry in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// An append-only history file held open by its owner.
#[derive(Debug)]
pub struct Appender {
    file: File,
    /// Whether the file may end in a torn line that must be cut before the next append.
    check_tail: bool,
}

impl Appender {
    /// Creates a new history file (it must not exist) and makes the entry durable.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        file.sync_all()?;
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
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
    pub fn append(&mut self, records: &[serde_json::Value]) -> io::Result<()> {
        if self.check_tail {
            self.cut_torn_tail()?;
            self.check_tail = false;
        }
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
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

/// Milliseconds since the Unix epoch, now.
#[must_use]
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats epoch milliseconds as UTC RFC 3339 (`…Z`, milliseconds only when non-zero).
#[must_use]
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let (h, mi, se) = (s / 3600, (s % 3600) / 60, s % 60);
    if milli == 0 {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}Z")
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{milli:03}Z")
    }
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, optional fraction) to epoch ms.
#[must_use]
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut milli = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 3)];
        milli = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let sign = if *c == b'+' { 1 } else { -1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + milli)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        let t = parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
        assert_eq!(rfc3339(t), "2026-11-30T12:00:00Z");
        assert_eq!(parse_rfc3339("2026-11-30T13:00:00.5+01:00"), Some(t + 500));
        assert_eq!(rfc3339(t + 7), "2026-11-30T12:00:00.007Z");
        assert_eq!(parse_rfc3339("2026-13-30T12:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-11-30 12:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-11-30T12:00:00"), None);
    }

    #[test]
    fn leases_exclude_and_clean_up() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("sessions")).unwrap();
        let s = Sessions::new(d.path());
        let id = SessionId::new("abc").unwrap();
        assert!(!s.lease_present(&id));
        let l = Lease::acquire(&s, &id, LeaseKind::Writer).unwrap();
        assert!(s.lease_present(&id));
        assert_eq!(
            Lease::acquire(&s, &id, LeaseKind::Writer).unwrap_err(),
            LeaseError::Busy
        );
        drop(l);
        assert!(!s.lease_present(&id));
        // A stale file (crashed owner) is taken over.
        fs::write(s.lease_path(&id, LeaseKind::Writer), b"12345\n").unwrap();
        assert!(s.lease_present(&id));
        let l = Lease::acquire(&s, &id, LeaseKind::Writer).unwrap();
        drop(l);
    }

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
        let mut a = Appender::create(&g).unwrap();
        assert!(Appender::create(&g).is_err());
        a.append(&[serde_json::json!({"x":1})]).unwrap();
        assert_eq!(fs::read(&g).unwrap(), b"{\"x\":1}\n");
    }
}
