//! The model catalog cache files `cache/models/<provider>.json`: bounded reads and validation.

use crate::providers::model::Thinking;
use crate::runtime::Runtime;
use crate::store::{self, ReadError};
use crate::util::time::parse_rfc3339;
use protocol_core::json::parse_strict;
use protocol_core::limits::CATALOG_FILE_BYTES;
use protocol_core::ErrorCode;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Explicit effort levels a cached model may list.
const EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// One cached model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Model ID.
    pub id: String,
    /// Display name, if cached.
    pub name: Option<String>,
    /// Explicit effort levels: `None` unknown, empty unsupported.
    pub efforts: Option<Vec<String>>,
    /// Retired models are never offered.
    pub retired: bool,
    /// How an Anthropic model takes effort (`"thinking"`: absent or `adaptive`, or `budget`).
    pub thinking: Thinking,
    /// The model's context window in tokens (`"context_window"`), if cached.
    pub context_window: Option<u64>,
}

/// What one provider's cache holds.
#[derive(Debug, Clone)]
pub enum Cache {
    /// No cache file.
    Missing,
    /// The file is not a valid cache of this provider.
    Invalid,
    /// A valid cache listing no model.
    Empty {
        /// When it was fetched.
        fetched_at: String,
    },
    /// A valid cache with models.
    Models {
        /// When it was fetched.
        fetched_at: String,
        /// The models, in file order.
        models: Vec<Model>,
    },
}

/// Reads and validates `cache/models/<provider>.json` (`backend.md`, `decisions.md` 18).
pub fn read_cache(
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
    let held = match store::read_held(&path, CATALOG_FILE_BYTES.min(*bytes_left), 1_000_000) {
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
    Ok(valid_cache(&v, provider).unwrap_or(Cache::Invalid))
}

/// The cache file's JSON as a [`Cache`] for `provider`, or `None` when any member is wrong
/// (the caller reports that as `Invalid`).
fn valid_cache(v: &Value, provider: &str) -> Option<Cache> {
    let o = v.as_object()?;
    if o.get("provider")?.as_str()? != provider {
        return None;
    }
    let fetched_at = o.get("fetched_at")?.as_str()?;
    parse_rfc3339(fetched_at)?;
    let mut models = Vec::new();
    for m in o.get("models")?.as_array()? {
        models.push(valid_model(m)?);
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
}

/// One `models` entry, or `None` when any of its members is wrong (which invalidates the
/// whole cache).
fn valid_model(m: &Value) -> Option<Model> {
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
    let thinking = match m.get("thinking").map(Value::as_str) {
        None | Some(Some("adaptive")) => Thinking::Adaptive,
        Some(Some("budget")) => Thinking::Budget,
        Some(_) => return None,
    };
    let context_window = match m.get("context_window") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64()?),
    };
    Some(Model {
        id,
        name,
        efforts,
        retired,
        thinking,
        context_window,
    })
}

/// How `model` of `provider` takes effort, from its cache entry (`backend.md`: absent means
/// adaptive); adaptive too when the cache cannot say.
#[must_use]
pub fn thinking(rt: &Runtime, provider: &str, model: &str) -> Thinking {
    let mut bytes_left = CATALOG_FILE_BYTES;
    match read_cache(rt, provider, &mut Sha256::new(), &mut bytes_left) {
        Ok(Cache::Models { models, .. }) => models
            .iter()
            .find(|m| m.id == model)
            .map_or(Thinking::Adaptive, |m| m.thinking),
        _ => Thinking::Adaptive,
    }
}

/// The effort controls of `provider`/`model` (`decisions.md` 36): one bounded read of its
/// cache entry, never a provider request. `None` is unknown (no readable cache, no entry),
/// empty is unsupported, else the explicit levels; the built-in `scripted` models have none.
#[must_use]
pub fn efforts(rt: &Runtime, provider: &str, model: &str) -> Option<Vec<String>> {
    use crate::config::providers::{self, Kind, CLI_EFFORTS};
    match providers::builtin(provider).map(|r| r.kind) {
        Some(Kind::Offline { .. }) => return Some(Vec::new()),
        Some(Kind::AgentCli {
            models,
            with_effort,
            ..
        }) => {
            // The CLI's own names take its efforts (`haiku` none); a cached entry says its own.
            if let Some(i) = models.iter().position(|m| *m == model) {
                let efforts = if i < with_effort {
                    &CLI_EFFORTS[..]
                } else {
                    &[]
                };
                return Some(efforts.iter().map(|e| (*e).to_owned()).collect());
            }
        }
        _ => {}
    }
    let mut bytes_left = CATALOG_FILE_BYTES;
    match read_cache(rt, provider, &mut Sha256::new(), &mut bytes_left) {
        Ok(Cache::Models { models, .. }) => models
            .into_iter()
            .find(|m| m.id == model)
            .and_then(|m| m.efforts),
        _ => None,
    }
}

/// The context window of `model` of `provider` in tokens (`runner.md` 7): its cache entry's
/// `context_window`, else `providers.<provider>.context_window`, else `runner.context_window`;
/// any of them within 1,000–10,000,000 (`decisions.md` 45).
#[must_use]
pub fn context_window(rt: &Runtime, provider: &str, model: &str) -> u64 {
    use crate::config::settings::{MAX_CONTEXT_WINDOW, MIN_CONTEXT_WINDOW};
    let mut bytes_left = CATALOG_FILE_BYTES;
    let cached = match read_cache(rt, provider, &mut Sha256::new(), &mut bytes_left) {
        Ok(Cache::Models { models, .. }) => models
            .iter()
            .find(|m| m.id == model)
            .and_then(|m| m.context_window),
        _ => None,
    };
    cached
        .unwrap_or_else(|| rt.settings.context_window_of(provider))
        .clamp(MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::{MAX_CONTEXT_WINDOW, MIN_CONTEXT_WINDOW};
    use std::fs;
    use std::os::unix::fs::DirBuilderExt;

    /// A runtime whose `runner.context_window` is `fallback`, with `cache/models/local.json`
    /// listing `models` (no file when `None`).
    fn setup(fallback: u64, models: Option<Value>) -> (tempfile::TempDir, Runtime) {
        let d = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(d.path()).unwrap();
        let mut rt = Runtime::for_tests(&root, &root);
        rt.settings.context_window = fallback;
        if let Some(models) = models {
            let dir = root.join("cache").join("models");
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .unwrap();
            let cache = serde_json::json!({"provider": "local", "fetched_at": "2026-11-30T12:00:00Z", "models": models});
            fs::write(dir.join("local.json"), cache.to_string()).unwrap();
        }
        (d, rt)
    }

    #[test]
    fn the_cached_window_wins_over_the_setting() {
        let (_d, rt) = setup(
            50_000,
            Some(serde_json::json!([
                {"id": "big", "context_window": 400_000},
                {"id": "plain"},
                {"id": "nulled", "context_window": null},
            ])),
        );
        assert_eq!(context_window(&rt, "local", "big"), 400_000);
        // No window in the entry, no entry, no cache file: `runner.context_window`.
        assert_eq!(context_window(&rt, "local", "plain"), 50_000);
        assert_eq!(context_window(&rt, "local", "nulled"), 50_000);
        assert_eq!(context_window(&rt, "local", "absent"), 50_000);
        assert_eq!(context_window(&rt, "other", "big"), 50_000);
    }

    #[test]
    fn every_effort_a_cache_may_list_has_its_wire_value() {
        for name in EFFORTS.iter().chain(&["default"]) {
            let wire = super::super::effort::wire_effort(name).expect(name);
            assert_eq!(serde_json::to_value(wire).unwrap(), *name);
        }
        assert_eq!(super::super::effort::wire_effort("turbo"), None);
    }

    #[test]
    fn efforts_come_from_the_model_entry_or_are_unknown() {
        let (_d, rt) = setup(
            50_000,
            Some(serde_json::json!([
                {"id": "levels", "efforts": ["low", "high"]},
                {"id": "none", "efforts": []},
                {"id": "silent"},
            ])),
        );
        let levels = Some(vec!["low".to_owned(), "high".to_owned()]);
        assert_eq!(efforts(&rt, "local", "levels"), levels);
        assert_eq!(efforts(&rt, "local", "none"), Some(Vec::new()));
        // No `efforts`, no entry, no cache file: unknown.
        assert_eq!(efforts(&rt, "local", "silent"), None);
        assert_eq!(efforts(&rt, "local", "absent"), None);
        assert_eq!(efforts(&rt, "other", "levels"), None);
        // The built-in models have no effort control, cache or not.
        assert_eq!(efforts(&rt, "scripted", "echo"), Some(Vec::new()));
    }

    #[test]
    fn the_provider_window_is_between_the_cache_and_the_runner_setting() {
        let (_d, mut rt) = setup(
            50_000,
            Some(serde_json::json!([{"id": "big", "context_window": 400_000}, {"id": "plain"}])),
        );
        rt.settings.context_windows.insert("local".into(), 2_048);
        assert_eq!(context_window(&rt, "local", "big"), 400_000);
        assert_eq!(context_window(&rt, "local", "plain"), 2_048);
        assert_eq!(context_window(&rt, "other", "plain"), 50_000);
    }

    #[test]
    fn a_missing_or_invalid_cache_falls_back_to_the_setting() {
        let (_d, rt) = setup(7_000, None);
        assert_eq!(context_window(&rt, "local", "big"), 7_000);
        // A negative window makes the whole file invalid.
        let (_d, rt) = setup(
            7_000,
            Some(serde_json::json!([{"id": "big", "context_window": -1}])),
        );
        assert_eq!(context_window(&rt, "local", "big"), 7_000);
    }

    #[test]
    fn a_cached_window_is_clamped_to_the_setting_bounds() {
        let (_d, rt) = setup(
            50_000,
            Some(serde_json::json!([
                {"id": "tiny", "context_window": MIN_CONTEXT_WINDOW - 1},
                {"id": "least", "context_window": MIN_CONTEXT_WINDOW},
                {"id": "most", "context_window": MAX_CONTEXT_WINDOW},
                {"id": "huge", "context_window": MAX_CONTEXT_WINDOW + 1},
                {"id": "zero", "context_window": 0},
            ])),
        );
        assert_eq!(context_window(&rt, "local", "tiny"), MIN_CONTEXT_WINDOW);
        assert_eq!(context_window(&rt, "local", "least"), MIN_CONTEXT_WINDOW);
        assert_eq!(context_window(&rt, "local", "most"), MAX_CONTEXT_WINDOW);
        assert_eq!(context_window(&rt, "local", "huge"), MAX_CONTEXT_WINDOW);
        assert_eq!(context_window(&rt, "local", "zero"), MIN_CONTEXT_WINDOW);
    }
}
