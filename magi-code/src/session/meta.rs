//! The owner's derived metadata file, `sessions/<id>.meta.json` (`decisions.md` 50): written
//! after its appends without fsync, read only once verified against the JSONL it describes.

use super::state::Attachment;
use crate::history::meta::{digest_from, verified, Meta, META_BYTES};
use crate::runtime::Runtime;
use crate::store::{self, HeldFile, SessionId, Sessions, Sweep};

/// Replaces the metadata of the attached session with what its state says of the file as its
/// own appends left it; false when that failed (the append it follows stands regardless).
pub fn write(rt: &Runtime, a: &Attachment) -> bool {
    let Some(h) = a.history.as_ref().filter(|h| h.error().is_none()) else {
        return false;
    };
    let Some(app) = a.appender.as_ref() else {
        return false;
    };
    let Ok(identity) = app.identity() else {
        return false;
    };
    let covered = h.end();
    if covered > identity.len {
        return false;
    }
    let from = digest_from(covered);
    let mut last = vec![0u8; usize::try_from(covered - from).unwrap_or(0)];
    if app.read_at(from, &mut last).is_err() {
        return false;
    }
    let meta = Meta::of(
        a.id.as_str(),
        (identity.dev, identity.ino),
        (covered, &last),
        (h.records(), h.horizon(), h.window_start()),
        h.summary(),
    );
    let Some(bytes) = meta.to_bytes() else {
        return false;
    };
    let sessions = Sessions::new(&rt.root);
    store::replace_unsynced(&sessions.meta_path(&a.id), &bytes, 0o600, Sweep::Beside).is_ok()
}

/// The metadata of `id` if it describes the held JSONL `file` (its identity, a covered length
/// within it, the digest of the bytes before that length), and the bytes read to tell.
/// Garbage, torn, stale and foreign metadata is `None`.
#[must_use]
pub fn read_verified(sessions: &Sessions, id: &SessionId, file: &HeldFile) -> (Option<Meta>, u64) {
    let Ok(held) = store::read_held(&sessions.meta_path(id), META_BYTES as u64, usize::MAX) else {
        return (None, 0);
    };
    let (meta, read) = verified(
        &held.bytes,
        id.as_str(),
        file.dev_ino(),
        file.len(),
        |at, buf| file.read_at(at, buf).is_ok(),
    );
    (meta, read + held.bytes.len() as u64)
}
