//! One catalog scan: every provider's cache read under the scan budgets, the enabled choices
//! serialized in byte order, and the fingerprint a continuation or `selection.set` must match.

use super::cache::{read_cache, Cache, Model};
use super::effort::{effort_support, selection_id, wire_effort};
use crate::config::providers::{self, Kind};
use crate::providers::provider_ready;
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use crate::util::notice::{self, Notice};
use crate::util::redact::safe_name;
use crate::wire::results::{Availability, Choice};
use protocol_core::limits::{
    CATALOG_MODELS, CATALOG_SCAN_BYTES, CATALOG_SCAN_MS, CATALOG_SNAPSHOT_BYTES,
    CATALOG_STRING_BYTES,
};
use protocol_core::ErrorCode;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Every provider of the admitted settings, in byte order.
#[must_use]
pub fn providers(rt: &Runtime) -> Vec<String> {
    let mut p: BTreeSet<String> = providers::names().map(str::to_owned).collect();
    p.extend(rt.settings.compat.keys().cloned());
    p.into_iter().collect()
}

/// The enabled `provider/model` pairs.
#[must_use]
pub fn enabled(rt: &Runtime) -> BTreeSet<(String, String)> {
    rt.settings
        .catalog_enabled
        .iter()
        .filter_map(|e| e.split_once('/').map(|(p, m)| (p.to_owned(), m.to_owned())))
        .collect()
}

/// The built-in models of a provider that has them: an offline provider's fixed list
/// (without effort, and no cache), an agent CLI's (`opus` and `sonnet` with the CLI's efforts,
/// `haiku` without) before its cache file's entries.
fn builtin_models(
    rt: &Runtime,
    provider: &str,
    hasher: &mut Sha256,
    bytes_left: &mut u64,
) -> Option<Vec<Model>> {
    let model = |m: &&str, efforts: Vec<String>| Model {
        id: (*m).into(),
        name: None,
        efforts: Some(efforts),
        retired: false,
        thinking: crate::providers::model::Thinking::Adaptive,
        context_window: None,
    };
    match providers::builtin(provider)?.kind {
        Kind::Offline { models } => Some(models.iter().map(|m| model(m, Vec::new())).collect()),
        Kind::AgentCli {
            models,
            with_effort,
            ..
        } => {
            let efforts: Vec<String> = providers::CLI_EFFORTS
                .iter()
                .map(|e| (*e).to_owned())
                .collect();
            let mut all: Vec<Model> = models
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    model(
                        m,
                        if i < with_effort {
                            efforts.clone()
                        } else {
                            Vec::new()
                        },
                    )
                })
                .collect();
            if let Ok(Cache::Models { models, .. }) = read_cache(rt, provider, hasher, bytes_left) {
                for m in models {
                    if !all.iter().any(|b| b.id == m.id) {
                        all.push(m);
                    }
                }
            }
            Some(all)
        }
        Kind::Http { .. } => None,
    }
}

fn provider_display(provider: &str) -> Option<&'static str> {
    providers::builtin(provider).map(|r| r.display)
}

/// What one scan saw.
#[derive(Debug)]
pub struct Scan {
    /// Serialized choices, in `(provider, model)` byte order.
    pub choices: Vec<String>,
    /// Wire notice codes, in byte order.
    pub notices: Vec<&'static str>,
    /// Caches, enabled set and readiness as seen.
    pub fingerprint: [u8; 32],
}

/// Scans the caches; `selected` is the provider of the selection in effect, whose catalog
/// matters even when none of its models is enabled.
pub fn scan(rt: &Runtime, selected: &str, cancel: &Cancel) -> Result<Scan, ErrorCode> {
    let deadline = Instant::now() + Duration::from_millis(CATALOG_SCAN_MS);
    let enabled = enabled(rt);
    let mut hasher = Sha256::new();
    let mut bytes_left = CATALOG_SCAN_BYTES;
    let mut scanned = 0usize;
    let mut notices: Vec<Notice> = Vec::new();
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
        let mut cli_ready: Option<bool> = None;
        hasher.update(provider.as_bytes());
        let models =
            if let Some(models) = builtin_models(rt, &provider, &mut hasher, &mut bytes_left) {
                models
            } else {
                match read_cache(rt, &provider, &mut hasher, &mut bytes_left)? {
                    Cache::Models { models, .. } => {
                        scanned += models.len();
                        if scanned > CATALOG_MODELS {
                            return Err(ErrorCode::CatalogLimit);
                        }
                        models
                    }
                    _ => {
                        if relevant {
                            notices.push(Notice::ProviderCatalogUnavailable);
                        }
                        continue;
                    }
                }
            };
        for m in models {
            if !enabled.contains(&(provider.clone(), m.id.clone())) || m.retired {
                continue;
            }
            if m.id.len() > CATALOG_STRING_BYTES {
                return Err(ErrorCode::CatalogLimit);
            }
            if safe_name(&m.id).is_none() {
                notices.push(Notice::CatalogEntriesOmittedUnsafe);
                continue;
            }
            let mut settings = rt.settings.clone();
            settings.provider = provider.clone();
            settings.model = m.id.clone();
            // An agent CLI's readiness is its own subprocess: asked once per scan.
            let ready = if providers::is_agent_cli(&provider) {
                *cli_ready.get_or_insert_with(|| provider_ready(&settings, &rt.root))
            } else {
                provider_ready(&settings, &rt.root)
            };
            hasher.update([u8::from(ready)]);
            let choice = choice_line(&provider, &m, ready);
            size += choice.len() + 1;
            if size > CATALOG_SNAPSHOT_BYTES {
                return Err(ErrorCode::CatalogLimit);
            }
            choices.push(((provider.clone(), m.id.clone()), choice));
        }
    }
    finish(choices, notices, hasher)
}

/// One choice of the snapshot, serialized.
fn choice_line(provider: &str, m: &Model, ready: bool) -> String {
    let (support, permitted) = effort_support(m.efforts.as_deref());
    crate::wire::body(&Choice {
        selection_id: selection_id(provider, &m.id),
        provider: provider.to_owned(),
        model: m.id.clone(),
        provider_name: provider_display(provider).map(str::to_owned),
        model_name: m.name.as_deref().and_then(safe_name),
        availability: if ready {
            Availability::Available
        } else {
            Availability::AuthenticationUnavailable
        },
        effort_support: support.wire(),
        permitted_efforts: permitted.iter().filter_map(|e| wire_effort(e)).collect(),
    })
    .to_string()
}

/// The scan's result: choices in `(provider, model)` byte order (a pair seen twice makes the
/// catalog unavailable), notices sorted, and the fingerprint of all it read.
fn finish(
    mut choices: Vec<((String, String), String)>,
    notices: Vec<Notice>,
    hasher: Sha256,
) -> Result<Scan, ErrorCode> {
    choices.sort_by(|a, b| a.0.cmp(&b.0));
    if choices.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(ErrorCode::CatalogUnavailable);
    }
    let mut fingerprint = [0u8; 32];
    fingerprint.copy_from_slice(&hasher.finalize());
    Ok(Scan {
        choices: choices.into_iter().map(|(_, c)| c).collect(),
        notices: notice::sorted(notices),
        fingerprint,
    })
}
