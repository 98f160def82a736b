//! Session IDs and the only paths built from them: the sessions folder, histories, leases.

use protocol_core::ids::is_session_id;
use std::fs;
use std::path::{Path, PathBuf};

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

    /// `sessions/<id>.meta.json`: the owner's derived metadata (`decisions.md` 50).
    #[must_use]
    pub fn meta_path(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{}.meta.json", id.as_str()))
    }

    /// `sessions/subagents`: subagents' histories, never listed nor opened as sessions.
    #[must_use]
    pub fn subagents_dir(&self) -> PathBuf {
        self.dir.join("subagents")
    }

    /// `sessions/subagents/<id>.jsonl` for a subagent's own ID (`<session_id>-<n>`).
    #[must_use]
    pub fn subagent_path(&self, id: &SessionId) -> PathBuf {
        self.subagents_dir().join(format!("{}.jsonl", id.as_str()))
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
