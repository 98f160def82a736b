//! `model.catalog.status`: the provider-scoped reasons behind the catalog's notices.

use super::cache::{read_cache, Cache};
use super::scan::{enabled, providers};
use crate::config::providers::{self, Kind};
use crate::providers::target::keyed;
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use crate::wire::results::{self as wire, ModelCatalogStatusResult, ProviderStatus};
use protocol_core::limits::CATALOG_SCAN_BYTES;
use protocol_core::ErrorCode;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How many models an offline provider has (it has no cache), or `None` for another.
fn offline(provider: &str) -> Option<usize> {
    match providers::builtin(provider)?.kind {
        Kind::Offline { models } => Some(models.len()),
        Kind::Http { .. } | Kind::AgentCli { .. } => None,
    }
}

/// The catalog state of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderState {
    /// Cached models and a key: its choices are offered as available.
    Ready,
    /// None of its models is enabled.
    NotEnabled,
    /// No cache file.
    CacheMissing,
    /// A cache file that does not validate.
    CacheInvalid,
    /// A valid cache with no model.
    CacheEmpty,
    /// Cached models but no key.
    AuthenticationUnavailable,
}

impl ProviderState {
    /// The wire value.
    #[must_use]
    pub const fn wire(self) -> wire::ProviderState {
        match self {
            Self::Ready => wire::ProviderState::Ready,
            Self::NotEnabled => wire::ProviderState::NotEnabled,
            Self::CacheMissing => wire::ProviderState::CacheMissing,
            Self::CacheInvalid => wire::ProviderState::CacheInvalid,
            Self::CacheEmpty => wire::ProviderState::CacheEmpty,
            Self::AuthenticationUnavailable => wire::ProviderState::AuthenticationUnavailable,
        }
    }

    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::NotEnabled => "not_enabled",
            Self::CacheMissing => "cache_missing",
            Self::CacheInvalid => "cache_invalid",
            Self::CacheEmpty => "cache_empty",
            Self::AuthenticationUnavailable => "authentication_unavailable",
        }
    }
}

/// `model.catalog.status`.
pub fn status(rt: &Runtime, cancel: &Cancel) -> Result<Value, ErrorCode> {
    let enabled = enabled(rt);
    let mut hasher = Sha256::new();
    let mut bytes_left = CATALOG_SCAN_BYTES;
    let mut out = Vec::new();
    for provider in providers(rt) {
        if cancel.is_cancelled() {
            return Err(ErrorCode::OperationCancelled);
        }
        let is_enabled = enabled.iter().any(|(p, _)| *p == provider);
        let (state, count, fetched) = if let Some(row) = offline(&provider) {
            let state = if is_enabled {
                ProviderState::Ready
            } else {
                ProviderState::NotEnabled
            };
            (state, row, None)
        } else {
            let cache = read_cache(rt, &provider, &mut hasher, &mut bytes_left)?;
            let keyed = keyed(&rt.settings, &rt.root, &provider);
            match cache {
                _ if !is_enabled => (ProviderState::NotEnabled, 0, None),
                Cache::Missing => (ProviderState::CacheMissing, 0, None),
                Cache::Invalid => (ProviderState::CacheInvalid, 0, None),
                Cache::Empty { fetched_at } => (ProviderState::CacheEmpty, 0, Some(fetched_at)),
                Cache::Models { fetched_at, models } => (
                    if keyed {
                        ProviderState::Ready
                    } else {
                        ProviderState::AuthenticationUnavailable
                    },
                    models.len(),
                    Some(fetched_at),
                ),
            }
        };
        out.push(ProviderStatus {
            provider: provider.to_owned(),
            state: state.wire(),
            cached_models: count as u64,
            fetched_at: fetched,
        });
    }
    Ok(crate::wire::body(&ModelCatalogStatusResult {
        providers: out,
        notices: Vec::new(),
    }))
}
