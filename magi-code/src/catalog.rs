//! `model.catalog` and `model.catalog.status`: cache-only, bounded, one fingerprinted snapshot
//! per child. Nothing here fetches, writes or runs a provider.

use crate::cancel::Cancel;
use crate::paging;
use crate::redact::safe_name;
use crate::sessions::SessionState;
use crate::settings::BUILTIN_PROVIDERS;
use crate::startup::{self, fresh_revision, Runtime};
use crate::store::{self, ReadError};
use protocol_core::json::parse_strict;
use protocol_core::ErrorCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// `catalog_models`: cached models read per scan, before exclusions.
pub const MODELS: usize = 2_048;
/// `catalog_file_bytes`.
pub const FILE_BYTES: u64 = 1 << 20;
/// `catalog_scan_bytes`.
pub const SCAN_BYTES: u64 = 8 << 20;
/// `catalog_snapshot_bytes`.
pub const SNAPSHOT_BYTES: usize = 1 << 20;
/// `catalog_string_bytes`.
pub const STRING_BYTES: usize = 256;
/// `catalog_scan_ms`.
pub const SCAN_MS: u64 = 2_000;

const EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// One cached model.
#[derive(Debug, Clone)]
struct Model {
    id: String,
    name: Option<String>,
    efforts: Option<Vec<String>>,
    retired: bool,
}

/// What one provider's cache holds.
#[derive(Debug, Clone)]
enum Cache {
    Missing,
    Invalid,
    Empty {
        fetched_at: String,
    },
    Models {
        fetched_at: String,
        models: Vec<Model>,
    },
}

/// Reads and validates `cache/models/<provider>.json` (`backend.md`, `decisions.md` 18).
fn read_cache(
    rt: &Runtime,
    provider: &str,
    hasher: &mut Sha256,
    bytes_left: &mut u64,
) -> Result<Cache, ErrorCode> {
    let path = rt
        .root
        .join("cache")
        .join("models")
        .join(format!("{provider}.json"));
    let held = match store::read_held(&path, FILE_BYTES.min(*bytes_left), 1_000_000) {
        Ok(h) => h,
        Err(ReadError::Missing) => {
            hasher.update(b"missing\0");
            return Ok(Cache::Missing);
        }
        Err(ReadError::Unsafe) => return Err(ErrorCode::CatalogUnavailable),
        Err(ReadError::TooLarge) => return Err(ErrorCode::CatalogLimit),
    };
    *bytes_left -= held.bytes.len() as u64;
    hasher.update(Sha256::digest(&held.bytes));
    let Ok((v, dups)) = parse_strict(&held.bytes) else {
        return Ok(Cache::Invalid);
    };
    if !dups.top.is_empty() || dups.nested {
        return Ok(Cache::Invalid);
    }
    let valid = || -> Option<Cache> {
        let o = v.as_object()?;
        if o.get("provider")?.as_str()? != provider {
            return None;
        }
        let fetched_at = o.get("fetched_at")?.as_str()?;
        store::parse_rfc3339(fetched_at)?;
        let mut models = Vec::new();
        for m in o.get("models")?.as_array()? {
            let m = m.as_object()?;
            let id = m.get("id")?.as_str()?.to_owned();
            let name = match m.get("name") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return None,
            };
            let efforts = match m.get("efforts") {
                None | Some(Value::Null) => None,
                Some(Value::Array(a)) => {
                    let list: Option<Vec<String>> = a
                        .iter()
                        .map(|e| {
                            e.as_str()
                                .filter(|e| EFFORTS.contains(e))
                                .map(str::to_owned)
                        })
                        .collect();
                    Some(list?)
                }
                Some(_) => return None,
            };
            let retired = match m.get("retired") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return None,
            };
            models.push(Model {
                id,
                name,
                efforts,
                retired,
            });
        }
        Some(if models.is_empty() {
            Cache::Empty {
                fetched_at: fetched_at.to_owned(),
            }
        } else {
            Cache::Models {
                fetched_at: fetched_at.to_owned(),
                models,
            }
        })
    };
    Ok(valid().unwrap_or(Cache::Invalid))
}

/// Every provider of the admitted settings, in byte order.
fn providers(rt: &Runtime) -> Vec<String> {
    let mut p: BTreeSet<String> = BUILTIN_PROVIDERS.iter().map(|s| (*s).to_owned()).collect();
    p.extend(rt.settings.compat.keys().cloned());
    p.into_iter().collect()
}

/// The enabled `provider/model` pairs.
fn enabled(rt: &Runtime) -> BTreeSet<(String, String)> {
    rt.settings
        .catalog_enabled
        .iter()
        .filter_map(|e| e.split_once('/').map(|(p, m)| (p.to_owned(), m.to_owned())))
        .collect()
}

fn scripted_models() -> Vec<Model> {
    ["echo", "script"]
        .iter()
        .map(|m| Model {
            id: (*m).into(),
            name: None,
            efforts: Some(Vec::new()),
            retired: false,
        })
        .collect()
}

fn provider_display(provider: &str) -> Option<&'static str> {
    match provider {
        "anthropic" => Some("Anthropic"),
        "openai" => Some("OpenAI"),
        "scripted" => Some("Scripted"),
        _ => None,
    }
}

/// Effort support and permitted efforts of a model (`backend.md` "Model catalog cache").
#[must_use]
pub fn effort_support(efforts: Option<&[String]>) -> (&'static str, Vec<String>) {
    match efforts {
        None => ("unknown", vec!["default".into()]),
        Some([]) => ("unsupported", vec!["default".into()]),
        Some(list) => (
            "supported",
            std::iter::once("default".to_owned())
                .chain(list.iter().cloned())
                .collect(),
        ),
    }
}

/// The stable selection ID of a provider/model tuple.
#[must_use]
pub fn selection_id(provider: &str, model: &str) -> String {
    let mut h = Sha256::new();
    h.update(provider.as_bytes());
    h.update(b"\0");
    h.update(model.as_bytes());
    startup::hex(&h.finalize())
}

struct Scan {
    choices: Vec<String>,
    notices: Vec<&'static str>,
    fingerprint: [u8; 32],
}

fn scan(rt: &Runtime, st: &SessionState, cancel: &Cancel) -> Result<Scan, ErrorCode> {
    let deadline = Instant::now() + Duration::from_millis(SCAN_MS);
    let enabled = enabled(rt);
    let selected = st
        .selection
        .as_ref()
        .map(|s| s.provider.clone())
        .unwrap_or_else(|| rt.settings.provider.clone());
    let mut hasher = Sha256::new();
    let mut bytes_left = SCAN_BYTES;
    let mut scanned = 0usize;
    let mut notices: BTreeSet<&'static str> = BTreeSet::new();
    let mut choices: Vec<((String, String), String)> = Vec::new();
    let mut size = 0usize;
    for provider in providers(rt) {
        if cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        if Instant::now() > deadline {
            return Err(ErrorCode::CatalogLimit);
        }
        let relevant = enabled.iter().any(|(p, _)| *p == provider) || selected == provider;
        hasher.update(provider.as_bytes());
        let models = if provider == "scripted" {
            scripted_models()
        } else {
            match read_cache(rt, &provider, &mut hasher, &mut bytes_left)? {
                Cache::Models { models, .. } => {
                    scanned += models.len();
                    if scanned > MODELS {
                        return Err(ErrorCode::CatalogLimit);
                    }
                    models
                }
                _ => {
                    if relevant {
                        notices.insert("provider_catalog_unavailable");
                    }
                    continue;
                }
            }
        };
        for m in models {
            if !enabled.contains(&(provider.clone(), m.id.clone())) || m.retired {
                continue;
            }
            if m.id.len() > STRING_BYTES {
                return Err(ErrorCode::CatalogLimit);
            }
            if safe_name(&m.id).is_none() {
                notices.insert("catalog_entries_omitted_unsafe");
                continue;
            }
            let mut settings = rt.settings.clone();
            settings.provider = provider.clone();
            settings.model = m.id.clone();
            let ready = startup::provider_ready(&settings, &rt.root);
            hasher.update([u8::from(ready)]);
            let (support, permitted) = effort_support(m.efforts.as_deref());
            let choice = json!({
                "selection_id": selection_id(&provider, &m.id),
                "provider": provider,
                "model": m.id,
                "provider_name": provider_display(&provider),
                "model_name": m.name.as_deref().and_then(safe_name),
                "availability": if ready { "available" } else { "authentication_unavailable" },
                "effort_support": support,
                "permitted_efforts": permitted,
            })
            .to_string();
            size += choice.len() + 1;
            if size > SNAPSHOT_BYTES {
                return Err(ErrorCode::CatalogLimit);
            }
            choices.push(((provider.clone(), m.id.clone()), choice));
        }
    }
    choices.sort_by(|a, b| a.0.cmp(&b.0));
    if choices.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(ErrorCode::CatalogUnavailable);
    }
    let mut fingerprint = [0u8; 32];
    fingerprint.copy_from_slice(&hasher.finalize());
    Ok(Scan {
        choices: choices.into_iter().map(|(_, c)| c).collect(),
        notices: notices.into_iter().collect(),
        fingerprint,
    })
}

/// The catalog snapshot of this child.
#[derive(Debug, Default)]
pub struct CatalogState {
    snapshot: Option<Snapshot>,
}

#[derive(Debug)]
struct Snapshot {
    revision: String,
    choices: Vec<String>,
    notices: Vec<&'static str>,
    fingerprint: [u8; 32],
    stale: bool,
}

fn page(s: &Snapshot, start: usize, limit: u64) -> Value {
    let limit = usize::try_from(limit).unwrap_or(100);
    let base = paging::base_bytes(
        json!({"revision": s.revision, "choices": [], "complete": false, "notices": s.notices, "source": "cache_only"}),
    );
    let end = paging::end(&s.choices, start, limit, base);
    let next = paging::cursor(end, s.choices.len(), &s.revision);
    json!({"revision": s.revision, "choices": paging::values(&s.choices[start..end]), "complete": next.is_none(), "next_cursor": next, "notices": s.notices, "source": "cache_only"})
}

/// `model.catalog`.
pub fn catalog(
    rt: &Runtime,
    st: &mut SessionState,
    revision: Option<&str>,
    cursor: Option<&str>,
    limit: u64,
    cancel: &Cancel,
) -> Result<(Value, Option<protocol_core::ReadyView>), ErrorCode> {
    if let (Some(rev), Some(cur)) = (revision, cursor) {
        let snap = st
            .catalog
            .snapshot
            .as_ref()
            .ok_or(ErrorCode::StaleCatalog)?;
        if snap.stale || snap.revision != rev {
            return Err(ErrorCode::StaleCatalog);
        }
        let idx =
            paging::parse_cursor(cur, rev, snap.choices.len()).ok_or(ErrorCode::StaleCatalog)?;
        let fingerprint = snap.fingerprint;
        let rescan = scan(rt, st, cancel);
        let snap = st
            .catalog
            .snapshot
            .as_mut()
            .ok_or(ErrorCode::StaleCatalog)?;
        return match rescan {
            Ok(s) if s.fingerprint == fingerprint => Ok((page(snap, idx, limit), None)),
            Err(ErrorCode::OperationCancelled) => Err(ErrorCode::OperationCancelled),
            _ => {
                // Mutation or an unreadable/over-limit continuation: stale for good.
                snap.stale = true;
                Err(ErrorCode::StaleCatalog)
            }
        };
    }
    if let Some(old) = st.catalog.snapshot.as_mut() {
        old.stale = true;
    }
    let s = scan(rt, st, cancel)?;
    let snap = Snapshot {
        revision: fresh_revision(),
        choices: s.choices,
        notices: s.notices,
        fingerprint: s.fingerprint,
        stale: false,
    };
    let out = page(&snap, 0, limit);
    st.catalog.snapshot = Some(snap);
    Ok((out, None))
}

/// `model.catalog.status`: the provider-scoped reasons behind the catalog's notices.
pub fn status(
    rt: &Runtime,
    cancel: &Cancel,
) -> Result<(Value, Option<protocol_core::ReadyView>), ErrorCode> {
    let enabled = enabled(rt);
    let mut hasher = Sha256::new();
    let mut bytes_left = SCAN_BYTES;
    let mut out = Vec::new();
    for provider in providers(rt) {
        if cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        let is_enabled = enabled.iter().any(|(p, _)| *p == provider);
        let mut settings = rt.settings.clone();
        settings.provider = provider.clone();
        let (state, count, fetched) = if provider == "scripted" {
            (if is_enabled { "ready" } else { "not_enabled" }, 2, None)
        } else {
            let cache = read_cache(rt, &provider, &mut hasher, &mut bytes_left)?;
            let keyed = match provider.as_str() {
                "anthropic" | "openai" => startup::api_key(&provider, &rt.root).is_some(),
                other => rt.settings.compat.get(other).is_some_and(|c| {
                    c.api_key_env
                        .as_ref()
                        .is_none_or(|v| std::env::var_os(v).is_some_and(|k| !k.is_empty()))
                }),
            };
            match cache {
                _ if !is_enabled => ("not_enabled", 0, None),
                Cache::Missing => ("cache_missing", 0, None),
                Cache::Invalid => ("cache_invalid", 0, None),
                Cache::Empty { fetched_at } => ("cache_empty", 0, Some(fetched_at)),
                Cache::Models { fetched_at, models } => (
                    if keyed {
                        "ready"
                    } else {
                        "authentication_unavailable"
                    },
                    models.len(),
                    Some(fetched_at),
                ),
            }
        };
        out.push(json!({"provider": provider, "state": state, "cached_models": count, "fetched_at": fetched}));
    }
    Ok((json!({"providers": out, "notices": []}), None))
}

/// `selection.set`: validate everything against the attachment, the selection revision and the
/// catalog snapshot (revalidated by a rescan), append one `session_preferences` record durably,
/// then replace the selection. Nothing is written or changed on any error.
#[allow(clippy::too_many_arguments)]
pub fn select(
    rt: &Runtime,
    st: &mut SessionState,
    session_id: &str,
    selection_revision: &str,
    catalog_revision: &str,
    provider: &str,
    model: &str,
    effort: protocol_core::methods::EffortRequest,
    cancel: &Cancel,
) -> Result<(Value, Option<protocol_core::ReadyView>), ErrorCode> {
    use protocol_core::methods::EffortRequest;
    match &st.attachment {
        None => return Err(ErrorCode::SessionMissing),
        Some(a) if a.id.as_str() != session_id => return Err(ErrorCode::StaleSession),
        Some(_) => {}
    }
    let current = st
        .selection
        .clone()
        .unwrap_or_else(|| crate::sessions::Selection::startup(rt));
    if current.revision != selection_revision {
        return Err(ErrorCode::StaleSelection);
    }
    let Some(snap) = st
        .catalog
        .snapshot
        .as_ref()
        .filter(|s| !s.stale && s.revision == catalog_revision)
    else {
        return Err(ErrorCode::StaleCatalog);
    };
    let fingerprint = snap.fingerprint;
    // Revalidate: the caches and readiness must be what the snapshot saw.
    match scan(rt, st, cancel) {
        Ok(s) if s.fingerprint == fingerprint => {}
        Err(ErrorCode::OperationCancelled) => return Err(ErrorCode::OperationCancelled),
        _ => {
            if let Some(s) = st.catalog.snapshot.as_mut() {
                s.stale = true;
            }
            return Err(ErrorCode::StaleCatalog);
        }
    }
    let snap = st
        .catalog
        .snapshot
        .as_ref()
        .ok_or(ErrorCode::StaleCatalog)?;
    let choice: Value = snap
        .choices
        .iter()
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .find(|c| c["provider"] == provider && c["model"] == model)
        .ok_or(ErrorCode::SelectionInvalid)?;
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
    let efforts: Option<Vec<String>> = match choice["effort_support"].as_str() {
        Some("supported") => Some(
            permitted
                .iter()
                .filter(|e| *e != "default")
                .cloned()
                .collect(),
        ),
        Some("unsupported") => Some(Vec::new()),
        _ => None,
    };
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
    let record = json!({
        "type": "session_preferences",
        "session_id": session_id,
        "ts": store::rfc3339(store::now_ms()),
        "provider": provider,
        "model": model,
        "effort": requested,
    });
    if record.to_string().len() > protocol_core::limits::SELECTION_APPEND_BYTES {
        return Err(ErrorCode::InvalidParams);
    }
    let a = st.attachment.as_mut().ok_or(ErrorCode::SessionMissing)?;
    crate::sessions::append(rt, a, &[record])?;
    let mut notices: Vec<&str> = Vec::new();
    let history_revision = match crate::sessions::refresh(rt, a, &Cancel::default()) {
        Ok(r) => Some(r),
        Err(_) => {
            notices.push("history_unavailable");
            None
        }
    };
    let selection = crate::sessions::Selection {
        provider: provider.to_owned(),
        model: model.to_owned(),
        requested_effort: requested,
        revision: fresh_revision(),
        efforts,
    };
    let value = selection.to_value();
    st.selection = Some(selection);
    let view = crate::sessions::view(rt, st);
    Ok((
        json!({
            "session_id": session_id,
            "selection": value,
            "catalog_revision": catalog_revision,
            "scope": "session",
            "durable": true,
            "history_revision": history_revision,
            "notices": notices,
        }),
        Some(view),
    ))
}

/// `model.refresh`: the one deliberate remote request. Fetches the provider's model list
/// (bounded in time and bytes), validates it, and replaces `cache/models/<provider>.json`
/// atomically (temp file, fsync, rename, folder fsync). A failure leaves the old cache intact.
pub fn refresh(
    rt: &Runtime,
    st: &mut SessionState,
    provider: &str,
    cancel: &Cancel,
) -> Result<(Value, Option<protocol_core::ReadyView>), ErrorCode> {
    use std::io::{Read, Write};
    let target =
        crate::providers::target(rt, provider, "").ok_or(ErrorCode::ProviderUnavailable)?;
    let url = match target.api {
        crate::providers::Api::OpenAi => format!("{}/models", target.base_url),
        crate::providers::Api::Anthropic => format!("{}/v1/models?limit=1000", target.base_url),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into();
    let req = target.authorize(agent.get(&url));
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let resp = req.call().map_err(|_| ErrorCode::RefreshFailed)?;
    if !resp.status().is_success() {
        return Err(ErrorCode::RefreshFailed);
    }
    let mut body = Vec::new();
    resp.into_body()
        .into_reader()
        .take(FILE_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|_| ErrorCode::RefreshFailed)?;
    if body.len() as u64 > FILE_BYTES {
        return Err(ErrorCode::CatalogLimit);
    }
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let v: Value = serde_json::from_slice(&body).map_err(|_| ErrorCode::RefreshFailed)?;
    let list = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or(ErrorCode::RefreshFailed)?;
    if list.len() > MODELS {
        return Err(ErrorCode::CatalogLimit);
    }
    let mut models = Vec::with_capacity(list.len());
    for m in list {
        let id = m
            .get("id")
            .and_then(Value::as_str)
            .ok_or(ErrorCode::RefreshFailed)?;
        if id.is_empty() || id.len() > STRING_BYTES {
            return Err(ErrorCode::CatalogLimit);
        }
        let name = m.get("display_name").and_then(Value::as_str);
        models.push(json!({"id": id, "name": name}));
    }
    let fetched_at = store::rfc3339(store::now_ms());
    let cache = json!({"provider": provider, "fetched_at": fetched_at, "models": models});
    let dir = rt.root.join("cache").join("models");
    let tmp = dir.join(format!(
        ".{provider}.json.{}",
        uuid::Uuid::new_v4().simple()
    ));
    let write = || -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(cache.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(format!("{provider}.json")))?;
        store::sync_dir(&dir)
    };
    if write().is_err() {
        let _ = std::fs::remove_file(&tmp);
        return Err(ErrorCode::RefreshFailed);
    }
    if let Some(s) = st.catalog.snapshot.as_mut() {
        s.stale = true;
    }
    Ok((
        json!({"provider": provider, "models": models.len(), "fetched_at": fetched_at}),
        None,
    ))
}
