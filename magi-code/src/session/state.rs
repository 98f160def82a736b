//! The session state of one child, owned by the session worker: the attachment, the selection
//! in effect, and the paged snapshots of `session.list` and `model.catalog`.

use crate::history::{History, Item, Projection};
use crate::store::{Appender, Identity, Lease, SessionId};
use crate::util::ids::fresh_revision;
use crate::util::paging;
use protocol_core::{ErrorCode, ReadyView};
use serde_json::Value;

/// What an operation returns: its result and, when the status changed, the new view.
pub type OpResult = Result<(Value, Option<ReadyView>), ErrorCode>;

/// The selection in effect for subsequent turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Provider.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Requested effort (retained even when it does not apply).
    pub requested_effort: String,
    /// Opaque revision, fresh on every attachment or mutation.
    pub revision: String,
    /// The model's effort controls: `None` unknown, empty unsupported, else the explicit levels.
    pub efforts: Option<Vec<String>>,
}

/// One immutable history snapshot of the attachment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Opaque revision.
    pub revision: String,
    /// The projection.
    pub projection: Projection,
    /// File identity when read (`None` for a lazy handle).
    pub identity: Option<Identity>,
    /// Sticky invalidation.
    pub stale: bool,
}

impl Snapshot {
    /// The snapshot of a history with nothing in it yet.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            revision: fresh_revision(),
            projection: Projection::empty(),
            identity: None,
            stale: false,
        }
    }
}

/// The session this child is attached to.
#[derive(Debug)]
pub struct Attachment {
    /// Its ID.
    pub id: SessionId,
    /// Whether its history exists durably.
    pub durable: bool,
    /// The writer lease, held while durable and attached.
    pub writer: Option<Lease>,
    /// The open history file, once appended to.
    pub appender: Option<Appender>,
    /// The current history snapshot.
    pub snapshot: Snapshot,
    /// Turns recorded in the history (the scripted provider plays `turns[n mod len]`).
    pub turns: usize,
    /// The state derived from the history as this attachment wrote it, extended per append
    /// (`runner.md` 4); `None` once it may differ from the file, until rebuilt from it.
    pub history: Option<History>,
    /// The last append's metadata write failed (`decisions.md` 50): `selection.set` says so.
    pub meta_failed: bool,
    /// Its Code Mode helper, started by the first `exec` and killed when dropped with the
    /// attachment (`code-mode.md` 4); taken out while a cell runs.
    pub code: Option<crate::codemode::helper::Helper>,
    /// Its Claude Code CLI (`claude-subscription`), started by its first turn on that provider
    /// and ended when dropped with the attachment; taken out while a turn runs.
    pub claude: crate::providers::claude_proc::CliSlot,
}

impl Attachment {
    /// The items of the first whole turn the window holds (`session_invalid` when the state
    /// was dropped or refused), for the title request's exchange.
    pub fn first_turn(&self) -> Result<&[Item], ErrorCode> {
        let h = self.history.as_ref().ok_or(ErrorCode::SessionInvalid)?;
        if let Some(e) = h.error() {
            return Err(e.into());
        }
        h.first_turn().ok_or(ErrorCode::SessionInvalid)
    }
}

/// Session state of one child, owned by the session worker.
#[derive(Debug, Default)]
pub struct SessionState {
    /// The attachment, if any.
    pub attachment: Option<Attachment>,
    /// The selection in effect.
    pub selection: Option<Selection>,
    /// The snapshot of `session.list`.
    pub discovery: Option<paging::Snapshot>,
    /// The snapshot of `model.catalog`.
    pub catalog: Option<paging::Snapshot>,
}

impl SessionState {
    /// The ID of the attached session, if any.
    #[must_use]
    pub fn attached(&self) -> Option<&SessionId> {
        self.attachment.as_ref().map(|a| &a.id)
    }
}
