//! Derived metadata (`decisions.md` 50), sans-IO: the facts a session's owner keeps in
//! `sessions/<id>.meta.json` about the prefix of its JSONL it covers, their bytes, and the check
//! a reader makes before trusting them (the file's identity, the covered length, a digest of
//! the covered prefix's last bytes).

use super::summary::{Preferences, Summary};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bytes before the covered length that the digest covers.
pub const DIGEST_BYTES: u64 = 4096;
/// Largest metadata file read or written.
pub const META_BYTES: usize = 64 << 10;
/// Most recorded cwds kept (a history names one in practice).
const MAX_CWDS: usize = 16;

/// Saved preferences as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prefs {
    /// Provider.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Requested effort.
    pub effort: String,
}

/// The facts about one covered prefix of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Format version (1).
    pub v: u32,
    /// The session.
    pub session_id: String,
    /// The JSONL's device and inode.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// The length covered: just after a whole record's LF.
    pub covered: u64,
    /// SHA-256 (hex) of the up to [`DIGEST_BYTES`] bytes before `covered`.
    pub digest: String,
    /// Records before `covered`, from the session's start.
    pub records: u64,
    /// `user_input` records before `covered`.
    pub turns: u64,
    /// Every recorded cwd the owner read or wrote.
    pub cwds: Vec<String>,
    /// The newest record timestamp (epoch ms).
    pub updated_ms: Option<i64>,
    /// The latest title.
    pub title: Option<String>,
    /// The latest saved preferences.
    pub preferences: Option<Prefs>,
    /// Records before this offset belong to turns no projection can show any more.
    pub shown_from: u64,
    /// Records before this offset belong to turns no replay needs any more.
    pub replay_from: u64,
    /// Where the read window of the covered prefix starts (0: at the file's start): a later
    /// window starts at or after it.
    pub window_start: u64,
}

/// The digest of the bytes just before a covered length, as [`Meta::digest`] holds it.
#[must_use]
pub fn digest(last: &[u8]) -> String {
    crate::util::ids::hex(&Sha256::digest(last))
}

/// Where the digested bytes of a prefix of `covered` bytes start.
#[must_use]
pub const fn digest_from(covered: u64) -> u64 {
    covered.saturating_sub(DIGEST_BYTES)
}

impl Meta {
    /// The facts of `summary` (the owner's, whose records before `covered` are `records`),
    /// for a JSONL of identity `dev`/`ino` whose bytes before `covered` end in `last`.
    #[must_use]
    pub fn of(
        session_id: &str,
        (dev, ino): (u64, u64),
        (covered, last): (u64, &[u8]),
        (records, (shown_from, replay_from), window_start): (u64, (u64, u64), u64),
        summary: &Summary,
    ) -> Self {
        Self {
            v: 1,
            session_id: session_id.to_owned(),
            dev,
            ino,
            covered,
            digest: digest(last),
            records,
            turns: summary.turns as u64,
            cwds: summary.cwds.iter().take(MAX_CWDS).cloned().collect(),
            updated_ms: summary.updated_ms,
            title: summary.title.clone(),
            preferences: summary.preferences.as_ref().map(|p| Prefs {
                provider: p.provider.clone(),
                model: p.model.clone(),
                effort: p.effort.clone(),
            }),
            shown_from: shown_from.min(covered),
            replay_from: replay_from.min(covered),
            window_start: window_start.min(covered),
        }
    }

    /// Its bytes, or `None` when they would pass [`META_BYTES`].
    #[must_use]
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let mut b = serde_json::to_vec(self).ok()?;
        b.push(b'\n');
        (b.len() <= META_BYTES).then_some(b)
    }

    /// Parses metadata of `session_id`; anything else (garbage, another session's, another
    /// version, over the bound) is `None`.
    #[must_use]
    pub fn parse(bytes: &[u8], session_id: &str) -> Option<Self> {
        if bytes.len() > META_BYTES {
            return None;
        }
        let m: Self = serde_json::from_slice(bytes).ok()?;
        let sane = m.v == 1
            && m.shown_from <= m.covered
            && m.replay_from <= m.covered
            && m.window_start <= m.covered
            && m.session_id == session_id
            && m.digest.len() == 64
            && m.cwds.len() <= MAX_CWDS
            && m.preferences
                .as_ref()
                .is_none_or(|p| super::record::STORED_EFFORTS.contains(&p.effort.as_str()));
        sane.then_some(m)
    }

    /// Whether it describes the JSONL of identity `dev`/`ino` and length `len` whose bytes
    /// from [`digest_from`]`(covered)` to `covered` are `last`.
    #[must_use]
    pub fn matches(&self, (dev, ino): (u64, u64), len: u64, last: &[u8]) -> bool {
        self.dev == dev
            && self.ino == ino
            && self.covered <= len
            && last.len() as u64 == self.covered - digest_from(self.covered)
            && digest(last) == self.digest
    }

    /// The saved preferences as the summary holds them.
    #[must_use]
    pub fn prefs(&self) -> Option<Preferences> {
        self.preferences.as_ref().map(|p| Preferences {
            provider: p.provider.clone(),
            model: p.model.clone(),
            effort: p.effort.clone(),
        })
    }
}

/// The `type` of a stored line as this backend writes it (`"type":"…"` within its first
/// 512 bytes, after `session_id`, `ts` and `cwd`), without parsing the line.
#[must_use]
pub fn sniff_type(line: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b"\"type\":\"";
    let head = &line[..line.len().min(512)];
    let at = memchr::memmem::find(head, KEY)? + KEY.len();
    let len = memchr::memchr(b'"', &head[at..])?;
    Some(&head[at..at + len])
}

/// Parses the bytes of `session_id`'s metadata file and checks them against its JSONL, of
/// identity `dev_ino` and length `len`, whose bytes `read_at` reads: the metadata if it still
/// describes that file, and the JSONL bytes read to tell.
pub fn verified(
    bytes: &[u8],
    session_id: &str,
    dev_ino: (u64, u64),
    len: u64,
    read_at: impl FnOnce(u64, &mut [u8]) -> bool,
) -> (Option<Meta>, u64) {
    let Some(meta) = Meta::parse(bytes, session_id) else {
        return (None, 0);
    };
    if meta.covered > len {
        return (None, 0);
    }
    let from = digest_from(meta.covered);
    let mut last = vec![0u8; usize::try_from(meta.covered - from).unwrap_or(0)];
    if !read_at(from, &mut last) {
        return (None, 0);
    }
    let ok = meta.matches(dev_ino, len, &last);
    (ok.then_some(meta), last.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        let s = Summary {
            turns: 3,
            cwds: vec!["/w".into()],
            title: Some("t".into()),
            ..Summary::default()
        };
        Meta::of("s1", (1, 2), (10, b"0123456789"), (7, (0, 5), 0), &s)
    }

    #[test]
    fn metadata_round_trips_and_checks_what_it_covers() {
        let m = meta();
        let b = m.to_bytes().unwrap();
        assert_eq!(Meta::parse(&b, "s1"), Some(m.clone()));
        assert!(m.matches((1, 2), 10, b"0123456789"));
        assert!(m.matches((1, 2), 99, b"0123456789"), "appended after");
        assert!(!m.matches((1, 3), 10, b"0123456789"), "another file");
        assert!(!m.matches((1, 2), 9, b"012345678"), "shorter than covered");
        assert!(!m.matches((1, 2), 10, b"0123456780"), "other bytes");
    }

    #[test]
    fn garbage_foreign_and_torn_metadata_is_ignored() {
        let b = meta().to_bytes().unwrap();
        assert_eq!(Meta::parse(&b, "s2"), None, "another session's");
        assert_eq!(Meta::parse(&b[..b.len() / 2], "s1"), None, "torn");
        assert_eq!(Meta::parse(b"\x00\xff garbage", "s1"), None);
        let mut v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        v["v"] = 2.into();
        assert_eq!(Meta::parse(v.to_string().as_bytes(), "s1"), None);
        v["v"] = 1.into();
        v["extra"] = 1.into();
        assert_eq!(Meta::parse(v.to_string().as_bytes(), "s1"), None);
        let big = vec![b' '; META_BYTES + 1];
        assert_eq!(Meta::parse(&big, "s1"), None);
    }
}
