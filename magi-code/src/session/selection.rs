//! The selection in effect: the startup selection, its `status` view, the restore of saved
//! preferences at reopen, and `selection.set`.

use super::append::{append, refresh};
use super::state::{OpResult, Selection, SessionState};
use crate::catalog::cache::efforts;
use crate::catalog::effort::wire_effort;
use crate::catalog::{effort_support, scan, EffortSupport};
use crate::history::{Body, Record, Summary};
use crate::providers::provider_ready;
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use crate::util::ids::fresh_revision;
use crate::util::notice::Notice;
use crate::util::redact::safe_name;
use crate::wire::common::{ScopeSession, True};
use crate::wire::results as wire;
use protocol_core::limits::SELECTION_APPEND_BYTES;
use protocol_core::methods::EffortRequest;
use protocol_core::{ErrorCode, ReadyView};
use serde_json::Value;

impl Selection {
    /// The startup selection of the admitted settings, with a fresh revision and its effort
    /// controls resolved from the cached catalog (`decisions.md` 36: a local read).
    #[must_use]
    pub fn startup(rt: &Runtime) -> Self {
        Self {
            efforts: efforts(rt, &rt.settings.provider, &rt.settings.model),
            ..Self::unresolved(rt)
        }
    }

    /// The startup selection without reading anything, its effort controls unknown (the
    /// memory-only `status` fallback before a selection is stored).
    fn unresolved(rt: &Runtime) -> Self {
        Self {
            provider: rt.settings.provider.clone(),
            model: rt.settings.model.clone(),
            requested_effort: rt.settings.effort.clone(),
            revision: fresh_revision(),
            efforts: None,
        }
    }

    /// The selection's effort controls as the cache says now (`decisions.md` 36: turn
    /// admission and catalog observations). `Err` holds the refreshed selection, with a fresh
    /// revision, when they changed since the selection was resolved.
    pub fn recheck(&self, rt: &Runtime) -> Result<(), Self> {
        let now = efforts(rt, &self.provider, &self.model);
        if now == self.efforts {
            return Ok(());
        }
        Err(Self {
            efforts: now,
            revision: fresh_revision(),
            ..self.clone()
        })
    }

    /// The explicit effort to send: the requested one when the model supports it and it is
    /// permitted; `None` sends no effort (`default`, unknown or unsupported controls).
    #[must_use]
    pub fn effective_effort(&self) -> Option<String> {
        let (support, permitted) = effort_support(self.efforts.as_deref());
        (support == EffortSupport::Supported
            && self.requested_effort != "default"
            && permitted.contains(&self.requested_effort))
        .then(|| self.requested_effort.clone())
    }

    /// The `status.selection` object.
    #[must_use]
    pub fn to_value(&self) -> Value {
        crate::wire::body(&self.to_wire())
    }

    /// The selection object as its wire type (efforts are names the cache, the settings and
    /// the history reader admit, so each has its `wire::Effort`).
    #[must_use]
    pub fn to_wire(&self) -> wire::Selection {
        let (support, permitted) = effort_support(self.efforts.as_deref());
        // Supported controls resolve to the requested effort when it is permitted (a saved
        // request that no longer applies falls back to no override); otherwise null.
        let effective = (support == EffortSupport::Supported).then(|| {
            if permitted.contains(&self.requested_effort) {
                self.requested_effort.clone()
            } else {
                "default".to_owned()
            }
        });
        wire::Selection {
            revision: self.revision.clone(),
            provider: safe_name(&self.provider),
            model: safe_name(&self.model),
            requested_effort: wire_effort(&self.requested_effort).unwrap_or(wire::Effort::Default),
            effective_effort: effective.as_deref().and_then(wire_effort),
            effort_support: support.wire(),
            permitted_efforts: permitted.iter().filter_map(|e| wire_effort(e)).collect(),
        }
    }
}

/// The `status` view for the current state.
#[must_use]
pub fn view(rt: &Runtime, st: &SessionState) -> ReadyView {
    let sel = st
        .selection
        .clone()
        .unwrap_or_else(|| Selection::unresolved(rt));
    ReadyView {
        provider: safe_name(&sel.provider),
        model: safe_name(&sel.model),
        context_id: rt.context_id.clone(),
        session_id: st.attachment.as_ref().map(|a| a.id.as_str().to_owned()),
        selection: sel.to_value(),
    }
}

/// The selection restored from saved preferences, with its notices.
pub fn restore(rt: &Runtime, summary: &Summary, notices: &mut Vec<Notice>) -> Selection {
    let startup = Selection::startup(rt);
    let Some(p) = &summary.preferences else {
        return startup;
    };
    let mut candidate = rt.settings.clone();
    candidate.provider = p.provider.clone();
    candidate.model = p.model.clone();
    if provider_ready(&candidate, &rt.root) {
        let restored = Selection {
            provider: p.provider.clone(),
            model: p.model.clone(),
            requested_effort: p.effort.clone(),
            revision: startup.revision,
            efforts: efforts(rt, &p.provider, &p.model),
        };
        if p.effort != "default" && restored.effective_effort().is_none() {
            // The saved explicit effort does not apply to the model's controls as cached.
            notices.push(Notice::SavedSelectionNotice);
        }
        restored
    } else {
        notices.push(Notice::SavedSelectionUnavailable);
        Selection {
            requested_effort: p.effort.clone(),
            ..startup
        }
    }
}

/// A catalog choice as `selection.set` admits it: available, with its permitted efforts and
/// the effort controls a [`Selection`] keeps; `provider_unavailable` otherwise.
fn admit(choice: &Value) -> Result<(Vec<String>, Option<Vec<String>>), ErrorCode> {
    if choice["availability"] != "available" {
        return Err(ErrorCode::ProviderUnavailable);
    }
    let permitted: Vec<String> = choice["permitted_efforts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let efforts: Option<Vec<String>> = match choice["effort_support"]
        .as_str()
        .and_then(EffortSupport::parse)
    {
        Some(EffortSupport::Supported) => Some(
            permitted
                .iter()
                .filter(|e| *e != "default")
                .cloned()
                .collect(),
        ),
        Some(EffortSupport::Unsupported) => Some(Vec::new()),
        _ => None,
    };
    Ok((permitted, efforts))
}

/// `provider/model` as an admitted catalog choice now (a fresh scan, the checks of
/// `selection.set`): the selection it makes, keeping `requested_effort`. A pair the catalog
/// does not offer is `selection_invalid`; one not ready is `provider_unavailable`.
pub fn admitted(
    rt: &Runtime,
    provider: &str,
    model: &str,
    requested_effort: &str,
    cancel: &Cancel,
) -> Result<Selection, ErrorCode> {
    let snap = scan(rt, provider, cancel)?;
    let choice = find_choice(&snap.choices, provider, model)?;
    let (_, efforts) = admit(&choice)?;
    Ok(Selection {
        provider: provider.to_owned(),
        model: model.to_owned(),
        requested_effort: requested_effort.to_owned(),
        revision: fresh_revision(),
        efforts,
    })
}

/// The params of `selection.set`.
#[derive(Debug, Clone, Copy)]
pub struct SetSelection<'a> {
    /// The attached session it must name.
    pub session_id: &'a str,
    /// The selection revision it was read at.
    pub selection_revision: &'a str,
    /// The catalog snapshot the choice comes from.
    pub catalog_revision: &'a str,
    /// The chosen provider.
    pub provider: &'a str,
    /// The chosen model.
    pub model: &'a str,
    /// The effort request.
    pub effort: EffortRequest,
}

/// `selection.set`: validate everything against the attachment, the selection revision and the
/// catalog snapshot (revalidated by a rescan), append one `session_preferences` record durably,
/// then replace the selection. Nothing is written or changed on any error.
pub fn select(
    rt: &Runtime,
    st: &mut SessionState,
    req: SetSelection<'_>,
    cancel: &Cancel,
) -> OpResult {
    let SetSelection {
        session_id,
        selection_revision: _,
        catalog_revision,
        provider,
        model,
        effort,
    } = req;
    let current = checked_current(rt, st, &req, cancel)?;
    let snap = st.catalog.as_ref().ok_or(ErrorCode::StaleCatalog)?;
    let choice = find_choice(&snap.entries, provider, model)?;
    let (permitted, efforts) = admit(&choice)?;
    let requested = requested_effort(effort, &current, &permitted)?;
    let record = preferences_record(session_id, provider, model, &requested)?;
    let a = st.attachment.as_mut().ok_or(ErrorCode::SessionMissing)?;
    append(rt, a, &[record])?;
    let mut notices: Vec<Notice> = Vec::new();
    if a.meta_failed {
        notices.push(Notice::MetadataUpdateFailed);
    }
    let history_revision = match refresh(rt, a, &Cancel::default()) {
        Ok(r) => Some(r),
        Err(_) => {
            notices.push(Notice::HistoryUnavailable);
            None
        }
    };
    let selection = Selection {
        provider: provider.to_owned(),
        model: model.to_owned(),
        requested_effort: requested,
        revision: fresh_revision(),
        efforts,
    };
    let value = selection.to_wire();
    st.selection = Some(selection);
    let view = view(rt, st);
    Ok((
        crate::wire::body(&wire::SelectionSetResult {
            session_id: session_id.to_owned(),
            selection: value,
            catalog_revision: catalog_revision.to_owned(),
            scope: ScopeSession,
            durable: True,
            history_revision,
            notices: notices.iter().map(|n| n.as_str().to_owned()).collect(),
        }),
        Some(view),
    ))
}

/// The current selection, once `req` is checked against the attachment, the selection
/// revision and the catalog snapshot, and the snapshot revalidated by a rescan (a changed
/// fingerprint marks it stale: the client must read the catalog again).
fn checked_current(
    rt: &Runtime,
    st: &mut SessionState,
    req: &SetSelection<'_>,
    cancel: &Cancel,
) -> Result<Selection, ErrorCode> {
    match &st.attachment {
        None => return Err(ErrorCode::SessionMissing),
        Some(a) if a.id.as_str() != req.session_id => return Err(ErrorCode::StaleSession),
        Some(_) => {}
    }
    let current = st
        .selection
        .clone()
        .unwrap_or_else(|| Selection::startup(rt));
    if current.revision != req.selection_revision {
        return Err(ErrorCode::StaleSelection);
    }
    let Some(snap) = st
        .catalog
        .as_ref()
        .filter(|s| !s.stale && s.revision == req.catalog_revision)
    else {
        return Err(ErrorCode::StaleCatalog);
    };
    let fingerprint = snap.fingerprint;
    // Revalidate: the caches and readiness must be what the snapshot saw.
    match scan(rt, &current.provider, cancel) {
        Ok(s) if s.fingerprint == fingerprint => Ok(current),
        Err(ErrorCode::OperationCancelled) => Err(ErrorCode::OperationCancelled),
        _ => {
            if let Some(s) = st.catalog.as_mut() {
                s.stale = true;
            }
            Err(ErrorCode::StaleCatalog)
        }
    }
}

/// The catalog choice (one JSON text of `choices`) for `provider/model`, or
/// `selection_invalid` when the catalog does not offer the pair.
fn find_choice(choices: &[String], provider: &str, model: &str) -> Result<Value, ErrorCode> {
    choices
        .iter()
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .find(|c| c["provider"] == provider && c["model"] == model)
        .ok_or(ErrorCode::SelectionInvalid)
}

/// The effort `effort` asks for, as its wire name (`keep` keeps the current one), or
/// `effort_unsupported` when the model does not permit it.
fn requested_effort(
    effort: EffortRequest,
    current: &Selection,
    permitted: &[String],
) -> Result<String, ErrorCode> {
    let requested = match effort {
        EffortRequest::Default => "default".to_owned(),
        EffortRequest::Keep => current.requested_effort.clone(),
        EffortRequest::Set { value } => serde_json::to_value(value)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    };
    if requested != "default" && !permitted.contains(&requested) {
        return Err(ErrorCode::EffortUnsupported);
    }
    Ok(requested)
}

/// The `session_preferences` record a selection appends, refused as `invalid_params` when it
/// would exceed the append bound.
fn preferences_record(
    session_id: &str,
    provider: &str,
    model: &str,
    effort: &str,
) -> Result<Record, ErrorCode> {
    let record = Record::now(
        session_id,
        Body::SessionPreferences {
            provider: provider.to_owned(),
            model: model.to_owned(),
            effort: effort.to_owned(),
        },
    );
    let size = serde_json::to_string(&record).map_or(usize::MAX, |s| s.len());
    if size > SELECTION_APPEND_BYTES {
        return Err(ErrorCode::InvalidParams);
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;

    fn write_cache(root: &std::path::Path, efforts: &Value) {
        let dir = root.join("cache").join("models");
        fs::create_dir_all(&dir).unwrap();
        let cache = json!({"provider": "local", "fetched_at": "2026-11-30T12:00:00Z",
            "models": [{"id": "tiny", "efforts": efforts}]});
        fs::write(dir.join("local.json"), cache.to_string()).unwrap();
    }

    #[test]
    fn the_startup_selection_resolves_from_the_cache_and_admission_rechecks_it() {
        let d = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(d.path()).unwrap();
        let mut rt = Runtime::for_tests(&root, &root);
        rt.settings.provider = "local".into();
        rt.settings.model = "tiny".into();
        rt.settings.effort = "high".into();
        write_cache(&root, &json!(["low", "high"]));
        let sel = Selection::startup(&rt);
        assert_eq!(sel.effective_effort().as_deref(), Some("high"));
        assert_eq!(sel.to_value()["effort_support"], "supported");
        assert_eq!(sel.recheck(&rt), Ok(()), "an unchanged cache admits");
        write_cache(&root, &json!([]));
        let fresh = sel.recheck(&rt).unwrap_err();
        assert_ne!(fresh.revision, sel.revision);
        assert_eq!(fresh.efforts, Some(Vec::new()));
        assert_eq!(fresh.effective_effort(), None);
        assert_eq!(fresh.requested_effort, "high", "the request is retained");
        // The memory-only view before any selection is stored reads nothing.
        assert_eq!(Selection::unresolved(&rt).efforts, None);
    }
}
