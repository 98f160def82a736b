//! One discovery candidate: the bounded inventory of the sessions folder, and reading and
//! classifying one history under the per-file and per-scan budgets.

use crate::history::{self, display_title};
use crate::runtime::Runtime;
use crate::store::{self, ReadError, SessionId, Sessions, Streamed};
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

/// Reads and classifies one candidate, charging the budget.
pub fn examine(
    rt: &Runtime,
    attached: Option<&SessionId>,
    sessions: &Sessions,
    id: &SessionId,
    budget: &mut Budget,
    hasher: Option<&mut Sha256>,
) -> Result<Examined, ReadError> {
    let per_file = budget.file_bytes.min(budget.bytes);
    let per_lines = budget.file_lines.min(budget.lines);
    let lease = sessions.lease_present(id);
    let mut reader = history::Reader::new(id, false);
    let mut consumed = (0u64, 0usize);
    let mut digest = Sha256::new();
    let hashing = hasher.is_some();
    let streamed = store::stream_held(
        &sessions.history_path(id),
        per_file,
        per_lines,
        usize::try_from(per_file).unwrap_or(usize::MAX),
        &mut |line| {
            consumed.0 += line.len() as u64 + 1;
            consumed.1 += 1;
            if hashing {
                digest.update(line);
                digest.update(b"\n");
            }
            reader.line(line)
        },
    );
    let streamed = match streamed {
        Ok(s) => s,
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
    budget.bytes = budget.bytes.saturating_sub(consumed.0);
    budget.lines = budget.lines.saturating_sub(consumed.1);
    if let Some(h) = hasher {
        fingerprint(h, id, streamed.as_ref(), digest, lease);
    }
    let torn = streamed.as_ref().is_some_and(|s| s.torn);
    let (Some(_), Ok((parsed, _))) = (streamed, reader.finish(torn)) else {
        return Ok(Examined::Invalid);
    };
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
/// identity and torn flag, its lines' digest and whether a lease is present.
fn fingerprint(
    h: &mut Sha256,
    id: &SessionId,
    streamed: Option<&Streamed>,
    digest: Sha256,
    lease: bool,
) {
    h.update(id.as_str().as_bytes());
    h.update(b"\0");
    if let Some(st) = streamed {
        let i = st.identity;
        for n in [i.dev, i.ino, i.len, u64::from(i.mode)] {
            h.update(n.to_le_bytes());
        }
        h.update(i.mtime_ns.to_le_bytes());
        h.update([u8::from(st.torn)]);
    }
    h.update(digest.finalize());
    h.update([u8::from(lease)]);
}
