//! The attached session: `session.create`, `session.open`, `history.page`, and the durable
//! append path that turns and selection use.

use crate::cancel::Cancel;
use crate::history::{self, HistoryError, Projection, Summary};
use crate::startup::{self, fresh_revision, Runtime};
use crate::store::{
    self, Appender, Identity, Lease, LeaseError, LeaseKind, ReadError, SessionId, Sessions,
};
use protocol_core::{ErrorCode, ReadyView};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::MetadataExt;

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

/// Effort controls known without a cache: the built-in `scripted` models have none.
fn builtin_efforts(provider: &str) -> Option<Vec<String>> {
    (provider == "scripted").then(Vec::new)
}

impl Selection {
    /// The startup selection of the admitted settings, with a fresh revision.
    #[must_use]
    pub fn startup(rt: &Runtime) -> Self {
        Self {
            provider: rt.settings.provider.clone(),
            model: rt.settings.model.clone(),
            requested_effort: rt.settings.effort.clone(),
            revision: fresh_revision(),
            efforts: builtin_efforts(&rt.settings.provider),
        }
    }

    /// The `status.selection` object.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let (support, permitted) = crate::catalog::effort_support(self.efforts.as_deref());
        // Supported controls resolve to the requested effort when it is permitted (a saved
        // request that no longer applies falls back to no override); otherwise null.
        let effective = (support == "supported").then(|| {
            if permitted.contains(&self.requested_effort) {
                self.requested_effort.clone()
            } else {
                "default".to_owned()
            }
        });
        json!({
            "revision": self.revision,
            "provider": crate::redact::safe_name(&self.provider),
            "model": crate::redact::safe_name(&self.model),
            "requested_effort": self.requested_effort,
            "effective_effort": effective,
            "effort_support": support,
            "permitted_efforts": permitted,
        })
    }
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
    fn empty() -> Self {
        Self {
            revision: fresh_revision(),
            projection: Projection {
                entries: Vec::new(),
                complete: true,
            },
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
    appender: Option<Appender>,
    /// The current history snapshot.
    pub snapshot: Snapshot,
    /// Turns recorded in the history (the scripted provider plays `turns[n mod len]`).
    pub turns: usize,
}

/// Session state of one child, owned by the session worker.
#[derive(Debug, Default)]
pub struct SessionState {
    /// The attachment, if any.
    pub attachment: Option<Attachment>,
    /// The selection in effect.
    pub selection: Option<Selection>,
    /// The discovery snapshot of `session.list`.
    pub discovery: crate::discovery::DiscoveryState,
    /// The catalog snapshot of `model.catalog`.
    pub catalog: crate::catalog::CatalogState,
}

/// The `status` view for the current state.
#[must_use]
pub fn view(rt: &Runtime, st: &SessionState) -> ReadyView {
    let sel = st
        .selection
        .clone()
        .unwrap_or_else(|| Selection::startup(rt));
    ReadyView {
        provider: crate::redact::safe_name(&sel.provider),
        model: crate::redact::safe_name(&sel.model),
        context_id: rt.context_id.clone(),
        session_id: st.attachment.as_ref().map(|a| a.id.as_str().to_owned()),
        selection: sel.to_value(),
    }
}

type OpResult = Result<(Value, Option<ReadyView>), ErrorCode>;

/// `session.create`: a lazy handle, no file, no lease, no history.
pub fn create(rt: &Runtime, st: &mut SessionState) -> OpResult {
    let a = Attachment {
        id: SessionId::generate(),
        durable: false,
        writer: None,
        appender: None,
        snapshot: Snapshot::empty(),
        turns: 0,
    };
    let result = json!({ "session_id": a.id.as_str(), "durable": false, "revision": a.snapshot.revision, "notices": [] });
    // The previous attachment (and its lease) is released only now that the new one exists.
    st.attachment = Some(a);
    st.selection = Some(Selection::startup(rt));
    Ok((result, Some(view(rt, st))))
}

struct Loaded {
    summary: Summary,
    projection: Projection,
    identity: Identity,
    notices: Vec<&'static str>,
}

/// Longest single stored line buffered while reading a history.
pub const MAX_LINE_BYTES: usize = 16 << 20;

fn read_err(e: ReadError) -> ErrorCode {
    match e {
        ReadError::Missing => ErrorCode::SessionMissing,
        ReadError::Unsafe => ErrorCode::SessionInvalid,
        ReadError::TooLarge => ErrorCode::HistoryLimit,
    }
}

fn history_err(e: HistoryError) -> ErrorCode {
    match e {
        HistoryError::Invalid => ErrorCode::SessionInvalid,
        HistoryError::TooLarge => ErrorCode::HistoryLimit,
    }
}

/// Whether every recorded cwd is absolute and canonicalizes to the child's cwd.
pub fn cwd_matches(rt: &Runtime, cwds: &[String]) -> bool {
    cwds.iter().all(|c| {
        let p = std::path::Path::new(c);
        p.is_absolute() && fs::canonicalize(p).is_ok_and(|real| real == rt.cwd)
    })
}

fn load(rt: &Runtime, id: &SessionId, cancel: &Cancel) -> Result<Loaded, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    let mut reader = history::Reader::new(id, true);
    let mut cancelled = false;
    let mut n = 0usize;
    let streamed = store::stream_held(
        &sessions.history_path(id),
        store::HISTORY_READ_BYTES,
        store::HISTORY_READ_LINES,
        MAX_LINE_BYTES,
        &mut |line| {
            n += 1;
            if n.is_multiple_of(4096) && cancel.is_cancelled() {
                cancelled = true;
                return false;
            }
            reader.line(line)
        },
    )
    .map_err(read_err)?;
    if cancelled || cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let torn = streamed.is_some_and(|s| s.torn);
    let (summary, projection) = reader.finish(torn).map_err(history_err)?;
    let Some(streamed) = streamed else {
        return Err(ErrorCode::SessionInvalid);
    };
    if !cwd_matches(rt, &summary.cwds) {
        return Err(ErrorCode::CwdMismatch);
    }
    let mut notices = Vec::new();
    if summary.cwds.is_empty() {
        notices.push("cwd_unverified");
    }
    Ok(Loaded {
        summary,
        projection: projection.unwrap_or_default(),
        identity: streamed.identity,
        notices,
    })
}

/// The selection restored from saved preferences, with its notices.
fn restore(rt: &Runtime, summary: &Summary, notices: &mut Vec<&'static str>) -> Selection {
    let startup = Selection::startup(rt);
    let Some(p) = &summary.preferences else {
        return startup;
    };
    let mut candidate = rt.settings.clone();
    candidate.provider = p.provider.clone();
    candidate.model = p.model.clone();
    if startup::provider_ready(&candidate, &rt.root) {
        if p.provider == "scripted" && p.effort != "default" {
            // Saved explicit effort does not apply to a model without effort control.
            notices.push("saved_selection_notice");
        }
        Selection {
            provider: p.provider.clone(),
            model: p.model.clone(),
            requested_effort: p.effort.clone(),
            revision: startup.revision,
            efforts: builtin_efforts(&p.provider),
        }
    } else {
        notices.push("saved_selection_unavailable");
        Selection {
            requested_effort: p.effort.clone(),
            ..startup
        }
    }
}

/// `session.open`: exact ID only; the previous attachment stays intact on any failure.
pub fn open(rt: &Runtime, st: &mut SessionState, id: &str, cancel: &Cancel) -> OpResult {
    let id = SessionId::new(id).ok_or(ErrorCode::InvalidParams)?;
    let sessions = Sessions::new(&rt.root);
    if !sessions.is_safe() {
        return Err(ErrorCode::SessionInvalid);
    }
    if let Some(a) = st.attachment.as_mut().filter(|a| a.id == id) {
        if !a.durable {
            // Same-child reopen of a lazy handle.
            a.snapshot = Snapshot::empty();
            let result = json!({ "session_id": id.as_str(), "durable": false, "revision": a.snapshot.revision, "notices": [] });
            st.selection = Some(Selection::startup(rt));
            return Ok((result, Some(view(rt, st))));
        }
        let loaded = load(rt, &id, cancel)?;
        let mut notices = loaded.notices;
        let selection = restore(rt, &loaded.summary, &mut notices);
        a.snapshot = Snapshot {
            revision: fresh_revision(),
            projection: loaded.projection,
            identity: Some(loaded.identity),
            stale: false,
        };
        a.turns = loaded.summary.turns;
        let result = json!({ "session_id": id.as_str(), "durable": true, "revision": a.snapshot.revision, "notices": notices });
        st.selection = Some(selection);
        return Ok((result, Some(view(rt, st))));
    }
    match fs::symlink_metadata(sessions.history_path(&id)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ErrorCode::SessionMissing)
        }
        Err(_) => return Err(ErrorCode::SessionInvalid),
        Ok(m) if !m.file_type().is_file() => return Err(ErrorCode::SessionInvalid),
        Ok(_) => {}
    }
    let lease = Lease::acquire(&sessions, &id, LeaseKind::Writer).map_err(|e| match e {
        LeaseError::Busy => ErrorCode::SessionBusy,
        LeaseError::Unsafe => ErrorCode::SessionInvalid,
    })?;
    // On any error below the new lease is dropped and the old attachment is untouched.
    let loaded = load(rt, &id, cancel)?;
    let mut notices = loaded.notices;
    let selection = restore(rt, &loaded.summary, &mut notices);
    let a = Attachment {
        id,
        durable: true,
        writer: Some(lease),
        appender: None,
        snapshot: Snapshot {
            revision: fresh_revision(),
            projection: loaded.projection,
            identity: Some(loaded.identity),
            stale: false,
        },
        turns: loaded.summary.turns,
    };
    let result = json!({ "session_id": a.id.as_str(), "durable": true, "revision": a.snapshot.revision, "notices": notices });
    st.attachment = Some(a);
    st.selection = Some(selection);
    Ok((result, Some(view(rt, st))))
}

fn current_identity(path: &std::path::Path) -> Option<(u64, u64, u64, i128)> {
    fs::symlink_metadata(path).ok().map(|m| {
        (
            m.dev(),
            m.ino(),
            m.len(),
            i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        )
    })
}

/// `history.page`.
pub fn page(
    rt: &Runtime,
    st: &mut SessionState,
    session_id: &str,
    revision: &str,
    cursor: Option<&str>,
) -> OpResult {
    let a = st.attachment.as_mut().ok_or(ErrorCode::SessionMissing)?;
    if a.id.as_str() != session_id {
        return Err(ErrorCode::StaleSession);
    }
    let snap = &mut a.snapshot;
    if snap.stale || snap.revision != revision {
        return Err(ErrorCode::StaleRevision);
    }
    if let Some(id) = snap.identity {
        let now = current_identity(&Sessions::new(&rt.root).history_path(&a.id));
        if now != Some((id.dev, id.ino, id.len, id.mtime_ns)) {
            snap.stale = true;
            return Err(ErrorCode::StaleRevision);
        }
    }
    let entries = &snap.projection.entries;
    let start = match cursor {
        None => 0,
        Some(c) => crate::paging::parse_cursor(c, &snap.revision, entries.len())
            .ok_or(ErrorCode::StaleRevision)?,
    };
    let base = crate::paging::base_bytes(
        json!({ "session_id": session_id, "revision": snap.revision, "entries": [], "complete": false }),
    );
    let end = crate::paging::end(entries, start, history::PAGE_ENTRIES, base);
    let next = crate::paging::cursor(end, entries.len(), &snap.revision);
    let complete = next.is_none() && snap.projection.complete;
    Ok((
        json!({ "session_id": session_id, "revision": snap.revision, "entries": crate::paging::values(&entries[start..end]), "next_cursor": next, "complete": complete }),
        None,
    ))
}

/// Appends records to the attached session durably: the first append creates the history
/// (with its `session_meta` record), takes the writer lease and fsyncs file and folder.
/// Errors are `persistence_failed`, and nothing is claimed durable that was not written.
pub fn append(rt: &Runtime, a: &mut Attachment, records: &[Value]) -> Result<(), ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    if !sessions.is_safe() {
        return Err(ErrorCode::PersistenceFailed);
    }
    let path = sessions.history_path(&a.id);
    if !a.durable {
        let lease = Lease::acquire(&sessions, &a.id, LeaseKind::Writer)
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        let mut appender = Appender::create(&path).map_err(|_| ErrorCode::PersistenceFailed)?;
        let meta = json!({
            "type": "session_meta",
            "session_id": a.id.as_str(),
            "ts": store::rfc3339(store::now_ms()),
            "cwd": rt.cwd.to_string_lossy(),
        });
        appender
            .append(&[meta])
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        a.writer = Some(lease);
        a.appender = Some(appender);
        a.durable = true;
    }
    let _append_lease = Lease::acquire(&sessions, &a.id, LeaseKind::Append)
        .map_err(|_| ErrorCode::PersistenceFailed)?;
    if a.appender.is_none() {
        a.appender = Some(Appender::open(&path).map_err(|_| ErrorCode::PersistenceFailed)?);
    }
    let appender = a.appender.as_mut().ok_or(ErrorCode::PersistenceFailed)?;
    appender
        .append(records)
        .map_err(|_| ErrorCode::PersistenceFailed)?;
    // Our own write moves the history on: the snapshot is stale until rebuilt.
    a.snapshot.stale = true;
    Ok(())
}

/// Rebuilds the attachment's snapshot after its own appends; returns the new revision.
pub fn refresh(rt: &Runtime, a: &mut Attachment, cancel: &Cancel) -> Result<String, ErrorCode> {
    let loaded = load(rt, &a.id, cancel)?;
    a.snapshot = Snapshot {
        revision: fresh_revision(),
        projection: loaded.projection,
        identity: Some(loaded.identity),
        stale: false,
    };
    a.turns = loaded.summary.turns;
    Ok(a.snapshot.revision.clone())
}
