//! One discovery candidate: the bounded inventory of the sessions folder, and reading and
//! classifying one history under the per-file and per-scan budgets.

use crate::history::meta::{verified, META_BYTES};
use crate::history::window::{self, Bounds, Window};
use crate::history::{display_title, History, Summary};
use crate::runtime::Runtime;
use crate::store::{self, HeldFile, Identity, ReadError, SessionId, Sessions};
use crate::util::notice::Notice;
use crate::util::time::rfc3339;
use crate::wire::results::{Eligibility, SessionEntry};
use protocol_core::ErrorCode;
use sha2::{Digest, Sha256};
use std::fs;
use std::time::Instant;

/// Names in the sessions folder, bounded. Symlinked or missing folder → unavailable.
pub fn inventory(dir: &std::path::Path, bound: usize) -> Result<Vec<String>, ErrorCode> {
    let meta = fs::symlink_metadata(dir).map_err(|_| ErrorCode::DiscoveryUnavailable)?;
    if !meta.file_type().is_dir() {
        return Err(ErrorCode::DiscoveryUnavailable);
    }
    let mut names = Vec::new();
    for (n, entry) in fs::read_dir(dir)
        .map_err(|_| ErrorCode::DiscoveryUnavailable)?
        .enumerate()
    {
        if n >= bound {
            return Err(ErrorCode::DiscoveryLimit);
        }
        let entry = entry.map_err(|_| ErrorCode::DiscoveryUnavailable)?;
        let name = entry
            .file_name()
            .into_string()
            .map_err(|_| ErrorCode::DiscoveryUnavailable)?;
        names.push(name);
    }
    Ok(names)
}

/// The stem of a primary history name; a `.jsonl` name with a bad stem is an error.
pub fn history_stem(name: &str) -> Result<Option<SessionId>, ErrorCode> {
    match name.strip_suffix(".jsonl") {
        Some(stem) => SessionId::new(stem)
            .map(Some)
            .ok_or(ErrorCode::DiscoveryUnavailable),
        None => Ok(None),
    }
}

/// What one listing or discovery page may still spend.
pub struct Budget {
    /// History bytes.
    pub bytes: u64,
    /// History lines.
    pub lines: usize,
    /// History bytes of one file (charged whole for a file that could not be read).
    pub file_bytes: u64,
    /// History lines of one file.
    pub file_lines: usize,
    /// The cooperative deadline.
    pub deadline: Instant,
}

/// How one candidate was classified.
pub enum Examined {
    /// Listed, with its entry.
    Entry(SessionEntry),
    /// Valid, but of another workspace.
    Excluded,
    /// Failed validation.
    Invalid,
}

/// The newest bytes a large history is listed from when it has no valid derived metadata
/// (`decisions.md` 49).
pub const LARGE_TAIL_BYTES: u64 = 1 << 20;

/// What one candidate's read took.
struct Taken {
    /// The history's summary.
    summary: Summary,
    /// The file's identity.
    identity: Identity,
    /// Bytes and lines read.
    bytes: u64,
    lines: usize,
    /// Digest of the lines read, for the listing's fingerprint.
    digest: [u8; 32],
}

/// Reads one candidate (`decisions.md` 49): whole when within the per-session bounds, else
/// through its derived metadata and what was appended after it, else its first record and its
/// newest whole records within [`LARGE_TAIL_BYTES`]. `Ok(Err(read))` when what was read is not
/// a valid history (`read` bytes to charge).
fn take(
    file: HeldFile,
    sessions: &Sessions,
    id: &SessionId,
    file_bytes: u64,
    file_lines: usize,
    room: u64,
) -> Result<Result<Taken, u64>, ReadError> {
    let len = file.len();
    let mut meta_read = 0;
    if len > file_bytes {
        let (t, read) = through_meta(&file, sessions, id, file_bytes.min(room), file_lines)?;
        meta_read = read;
        if let Some(t) = t {
            let identity = file.finish()?;
            return Ok(t.map(|(summary, lines, digest)| Taken {
                summary,
                identity,
                bytes: read,
                lines,
                digest,
            }));
        }
    }
    let (head, tail, at, w, read) = match at_hand(
        &file,
        file_bytes,
        file_lines,
        room.saturating_sub(meta_read),
    )? {
        Ok(got) => got,
        Err(read) => return Ok(Err(read + meta_read)),
    };
    let read = read + meta_read;
    let head = head.as_deref().unwrap_or(&tail);
    let mut h = History::new(id, false);
    if crate::history::feed_at_hand(&mut h, head, &tail, at, &w).is_err() {
        return Ok(Err(read));
    }
    let mut digest = Sha256::new();
    if !w.whole {
        if let Some(e) = window::first_record_end(head) {
            digest.update(&head[..usize::try_from(e).unwrap_or(0).min(head.len())]);
        }
    }
    let ix = |o: u64| usize::try_from(o).unwrap_or(usize::MAX);
    digest.update(&tail[ix(w.start - at)..ix(w.end - at)]);
    let identity = file.finish()?;
    Ok(Ok(Taken {
        summary: h.summary().clone(),
        identity,
        bytes: read,
        lines: w.lines + usize::from(!w.whole),
        digest: digest.finalize().into(),
    }))
}

/// The bytes a listing reads of a candidate without metadata, and its window in them: the
/// whole file when within `file_bytes` (its newest records when over `file_lines`), else its
/// first bytes and its newest [`LARGE_TAIL_BYTES`]. `(head, tail, tail's offset, window, bytes
/// read)`, or the bytes read when they hold no window.
#[allow(clippy::type_complexity)]
fn at_hand(
    file: &HeldFile,
    file_bytes: u64,
    file_lines: usize,
    room: u64,
) -> Result<Result<(Option<Vec<u8>>, Vec<u8>, u64, Window, u64), u64>, ReadError> {
    let len = file.len();
    if len <= file_bytes {
        if len > room {
            return Err(ReadError::TooLarge);
        }
        let mut all = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        file.read_at(0, &mut all)?;
        let lines = memchr::memchr_iter(b'\n', &all).count();
        let bounds = if lines <= file_lines {
            Bounds {
                bytes: len,
                lines: file_lines,
            }
        } else {
            large_bounds(file_lines)
        };
        return Ok(match window::scan_bytes(&all, bounds) {
            Ok(w) => Ok((None, all, 0, w, len)),
            Err(_) => Err(len),
        });
    }
    let tail_len = len.min(LARGE_TAIL_BYTES + (64 << 10));
    let head_len = len.min(window::FIRST_RECORD_BYTES);
    if tail_len + head_len > room {
        return Err(ReadError::TooLarge);
    }
    let at = len - tail_len;
    let mut tail = vec![0u8; usize::try_from(tail_len).unwrap_or(usize::MAX)];
    file.read_at(at, &mut tail)?;
    let Ok(w) = window::scan_tail(&tail, at, len, large_bounds(file_lines)) else {
        return Ok(Err(tail_len));
    };
    // The first record: read in steps, most are a few hundred bytes.
    let mut head = Vec::new();
    while head.len() as u64 <= head_len {
        let n = (head.len() as u64 + (64 << 10)).min(head_len);
        head.resize(usize::try_from(n).unwrap_or(usize::MAX), 0);
        file.read_at(0, &mut head)?;
        if window::first_record_end(&head).is_some() || n == head_len {
            break;
        }
    }
    let read = tail_len + head.len() as u64;
    Ok(Ok((Some(head), tail, at, w, read)))
}

/// What a large history's derived metadata and the records appended after it say
/// (`decisions.md` 49, 50), and the bytes read to tell: `None` when there is no metadata that
/// still describes the file or what was appended does not fit `room` bytes and `file_lines`
/// lines; else its summary, lines read and digest, or `Err` when the appended records are not
/// valid.
#[allow(clippy::type_complexity)]
fn through_meta(
    file: &HeldFile,
    sessions: &Sessions,
    id: &SessionId,
    room: u64,
    file_lines: usize,
) -> Result<(Option<Result<(Summary, usize, [u8; 32]), u64>>, u64), ReadError> {
    let Ok(held) = store::read_held(&sessions.meta_path(id), META_BYTES as u64, usize::MAX) else {
        return Ok((None, 0));
    };
    let (meta, checked) = verified(
        &held.bytes,
        id.as_str(),
        file.dev_ino(),
        file.len(),
        |at, buf| file.read_at(at, buf).is_ok(),
    );
    let mut read = held.bytes.len() as u64 + checked;
    let Some(meta) = meta else {
        return Ok((None, read));
    };
    let appended = file.len() - meta.covered;
    if read + appended > room {
        return Ok((None, read));
    }
    let mut tail = vec![0u8; usize::try_from(appended).unwrap_or(usize::MAX)];
    file.read_at(meta.covered, &mut tail)?;
    read += appended;
    let whole = memchr::memrchr(b'\n', &tail).map_or(0, |i| i + 1);
    let lines = memchr::memchr_iter(b'\n', &tail[..whole]).count();
    if lines > file_lines {
        return Ok((None, read));
    }
    let mut h = History::from_meta(id, &meta);
    if whole > 0 {
        for line in tail[..whole - 1].split(|b| *b == b'\n') {
            if h.line(line).is_err() {
                return Ok((Some(Err(read)), read));
            }
        }
    }
    h.finish_read(whole < tail.len());
    let mut digest = Sha256::new();
    digest.update(&held.bytes);
    digest.update(&tail[..whole]);
    Ok((
        Some(Ok((h.summary().clone(), lines, digest.finalize().into()))),
        read,
    ))
}

/// The window of a large history's listing read: its newest whole records within
/// [`LARGE_TAIL_BYTES`], the first record beside them within the per-session lines.
const fn large_bounds(file_lines: usize) -> Bounds {
    Bounds {
        bytes: LARGE_TAIL_BYTES,
        lines: file_lines.saturating_sub(1),
    }
}

/// Reads and classifies one candidate, charging the budget.
pub fn examine(
    rt: &Runtime,
    attached: Option<&SessionId>,
    sessions: &Sessions,
    id: &SessionId,
    budget: &mut Budget,
    hasher: Option<&mut Sha256>,
) -> Result<Examined, ReadError> {
    let per_lines = budget.file_lines.min(budget.lines);
    let lease = sessions.lease_present(id);
    let taken = HeldFile::open(&sessions.history_path(id))
        .and_then(|f| take(f, sessions, id, budget.file_bytes, per_lines, budget.bytes));
    let taken = match taken {
        Ok(Ok(t)) => t,
        Ok(Err(read)) => {
            budget.bytes = budget.bytes.saturating_sub(read);
            if let Some(h) = hasher {
                h.update(id.as_str().as_bytes());
                h.update(b"\0invalid\0");
                h.update(read.to_le_bytes());
                h.update([u8::from(lease)]);
            }
            return Ok(Examined::Invalid);
        }
        Err(ReadError::Unsafe) => {
            // No trustworthy consumed size: charge the whole per-file budget.
            budget.bytes = budget.bytes.saturating_sub(budget.file_bytes);
            budget.lines = budget.lines.saturating_sub(budget.file_lines);
            if let Some(h) = hasher {
                h.update(id.as_str().as_bytes());
                h.update(b"\0unsafe\0");
                h.update([u8::from(lease)]);
            }
            return Ok(Examined::Invalid);
        }
        Err(e) => return Err(e),
    };
    budget.bytes = budget.bytes.saturating_sub(taken.bytes);
    budget.lines = budget.lines.saturating_sub(taken.lines);
    if let Some(h) = hasher {
        fingerprint(h, id, &taken, lease);
    }
    let parsed = &taken.summary;
    if !rt.is_workspace(&parsed.cwds) {
        return Ok(Examined::Excluded);
    }
    let ours = attached == Some(id);
    let unverified = parsed.cwds.is_empty();
    // Lease files of this child's own attachment do not make it busy to this child.
    let eligibility = if lease && !ours {
        Eligibility::Busy
    } else if unverified {
        Eligibility::CwdUnverified
    } else {
        Eligibility::Available
    };
    let notices: Vec<Notice> = if unverified {
        vec![Notice::CwdUnverified]
    } else {
        vec![]
    };
    Ok(Examined::Entry(SessionEntry {
        session_id: id.as_str().to_owned(),
        title: parsed.title.as_deref().and_then(display_title),
        updated_at: parsed.updated_ms.map(rfc3339),
        eligibility,
        notices: notices.iter().map(|n| n.as_str().to_owned()).collect(),
    }))
}

/// Feeds one history into the `session.list` scan's fingerprint: its name, the file's
/// identity and torn flag, the digest of the lines read and whether a lease is present.
fn fingerprint(h: &mut Sha256, id: &SessionId, t: &Taken, lease: bool) {
    h.update(id.as_str().as_bytes());
    h.update(b"\0");
    let i = t.identity;
    for n in [i.dev, i.ino, i.len, u64::from(i.mode)] {
        h.update(n.to_le_bytes());
    }
    h.update(i.mtime_ns.to_le_bytes());
    h.update([u8::from(t.summary.torn_tail)]);
    h.update(t.digest);
    h.update([u8::from(lease)]);
}
