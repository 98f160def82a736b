//! `model.catalog`, `model.catalog.status` and `model.refresh`: a cache-only, bounded catalog
//! with one fingerprinted snapshot per child. Only `model.refresh` fetches or writes.

pub mod cache;
pub mod effort;
pub mod refresh;
pub mod scan;
pub mod status;

pub use effort::{effort_support, selection_id, EffortSupport};
pub use refresh::refresh;
pub use scan::{scan, Scan};
pub use status::{status, ProviderState};

use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use crate::util::paging::Snapshot;
use crate::wire::common::CacheOnly;
use crate::wire::results::ModelCatalogResult;
use protocol_core::ErrorCode;
use serde_json::Value;

fn page(s: &Snapshot, start: usize, limit: u64) -> Value {
    let envelope = crate::wire::body(&ModelCatalogResult {
        revision: s.revision.clone(),
        choices: Vec::new(),
        next_cursor: None,
        complete: false,
        notices: s.notices.iter().map(|&n| n.to_owned()).collect(),
        source: CacheOnly,
    });
    s.page(
        start,
        limit,
        protocol_core::limits::CATALOG_PAGE_BYTES,
        "choices",
        envelope,
    )
}

/// `model.catalog`: a fresh snapshot in `slot` (the old one goes stale), or the page a
/// continuation names after a rescan that must match its fingerprint. `selected` is the
/// provider of the selection in effect.
pub fn catalog(
    rt: &Runtime,
    slot: &mut Option<Snapshot>,
    selected: &str,
    revision: Option<&str>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> Result<Value, ErrorCode> {
    if let (Some(rev), Some(cur)) = (revision, cursor) {
        let (idx, fingerprint) =
            Snapshot::continuation(slot, rev, cur).ok_or(ErrorCode::StaleCatalog)?;
        let rescan = scan(rt, selected, cancel);
        let snap = slot.as_mut().ok_or(ErrorCode::StaleCatalog)?;
        return match rescan {
            Ok(s) if s.fingerprint == fingerprint => Ok(page(snap, idx, limit)),
            Err(ErrorCode::OperationCancelled) => Err(ErrorCode::OperationCancelled),
            _ => {
                // Mutation or an unreadable/over-limit continuation: stale for good.
                snap.stale = true;
                Err(ErrorCode::StaleCatalog)
            }
        };
    }
    if let Some(old) = slot.as_mut() {
        old.stale = true;
    }
    let s = scan(rt, selected, cancel)?;
    let snap = Snapshot::new(s.choices, s.notices, s.fingerprint);
    let out = page(&snap, 0, limit);
    *slot = Some(snap);
    Ok(out)
}
