//! `model.refresh`: the one deliberate remote request of the catalog.

use crate::providers::{target, Api, Target};
use crate::runtime::Runtime;
use crate::store::{replace_atomically, Sweep};
use crate::util::cancel::Cancel;
use crate::util::paging::Snapshot;
use crate::util::time::{now_ms, rfc3339};
use crate::wire::results::ModelRefreshResult;
use protocol_core::limits::{CATALOG_FILE_BYTES, CATALOG_MODELS, CATALOG_STRING_BYTES};
use protocol_core::ErrorCode;
use serde_json::{json, Value};
use std::io::Read;
use std::time::Duration;

/// `model.refresh`: the one deliberate remote request. Fetches the provider's model list
/// (bounded in time and bytes), validates it, and replaces `cache/models/<provider>.json`
/// atomically (temp file, fsync, rename, folder fsync). A failure leaves the old cache intact.
pub fn refresh(
    rt: &Runtime,
    snapshot: &mut Option<Snapshot>,
    provider: &str,
    cancel: &Cancel,
) -> Result<Value, ErrorCode> {
    let target = target(rt, provider, "").ok_or(ErrorCode::ProviderUnavailable)?;
    let body = fetch(&target, cancel)?;
    let models = if target.api == Api::Codex {
        parse_codex_models(&body)?
    } else {
        parse_models(&body)?
    };
    let fetched_at = rfc3339(now_ms());
    let cache = json!({"provider": provider, "fetched_at": fetched_at, "models": models});
    let path = rt
        .root
        .join("cache")
        .join("models")
        .join(format!("{provider}.json"));
    // Durable only once the folder entry is synced too: otherwise the old cache may return.
    if !matches!(
        replace_atomically(
            &path,
            cache.to_string().as_bytes(),
            Some(0o600),
            Sweep::Folder
        ),
        Ok(true)
    ) {
        return Err(ErrorCode::RefreshFailed);
    }
    if let Some(s) = snapshot.as_mut() {
        s.stale = true;
    }
    Ok(crate::wire::body(&ModelRefreshResult {
        provider: provider.to_owned(),
        models: models.len() as u64,
        fetched_at,
    }))
}

/// The provider's model list as bytes: one GET, bounded in time (10 s to connect, 30 s in
/// all) and in bytes (`catalog_limit` past the cache bound), closed at once on cancel.
fn fetch(target: &Target, cancel: &Cancel) -> Result<Vec<u8>, ErrorCode> {
    let url = match target.api {
        Api::OpenAi | Api::Codex => format!("{}/models", target.base_url),
        Api::Anthropic => format!("{}/v1/models?limit=1000", target.base_url),
    };
    let agent = crate::util::http::bounded_agent(Duration::from_secs(10), Duration::from_secs(30));
    // Cancellation closes the connection, as a provider step's does: a blocked connect or
    // read returns at once, so a cancelled refresh frees the worker slot instead of holding
    // it up to the 30 s bound (`operation.cancel`, shutdown's cleanup wait).
    let closer = agent.clone();
    let _hook = cancel.on_cancel(move || closer.clone().shutdown());
    let failed = || {
        if cancel.is_cancelled() {
            ErrorCode::OperationCancelled
        } else {
            ErrorCode::RefreshFailed
        }
    };
    let req = match &target.codex {
        // A refresh the sign-in needs first is finished whatever happens to the operation.
        Some(c) => {
            let mut codex = crate::providers::codex::Codex::new(c.path.clone(), &c.auth_url);
            codex.fresh(cancel).map_err(|_| failed())?;
            codex.authorize(agent.get(&url), None)
        }
        None => target.authorize(agent.get(&url)),
    };
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let resp = req.call().map_err(|_| failed())?;
    if !resp.status().is_success() {
        return Err(failed());
    }
    let mut body = Vec::new();
    resp.into_body()
        .into_reader()
        .take(CATALOG_FILE_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|_| failed())?;
    if body.len() as u64 > CATALOG_FILE_BYTES {
        return Err(ErrorCode::CatalogLimit);
    }
    if cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    Ok(body)
}

/// The cache's `models` from a model list body: `{id, name}` for each `data` entry, refused
/// as `refresh_failed` when malformed, `catalog_limit` past the count or string bounds.
fn parse_models(body: &[u8]) -> Result<Vec<Value>, ErrorCode> {
    let v: Value = serde_json::from_slice(body).map_err(|_| ErrorCode::RefreshFailed)?;
    let mut models = Vec::new();
    for m in listed(&v, "data")? {
        let name = m.get("display_name").and_then(Value::as_str);
        models.push(json!({"id": text(m, "id")?, "name": name}));
    }
    Ok(models)
}

/// The cache's `models` from the `codex` provider's `GET {base_url}/models` answer
/// (`decisions.md` 43): `{"models": [{"slug", "display_name"?, "supported_reasoning_levels"?:
/// [{"effort"}]}]}`, each slug a model and its efforts its `efforts` (absent: unknown), with
/// the refusals of [`parse_models`].
fn parse_codex_models(body: &[u8]) -> Result<Vec<Value>, ErrorCode> {
    let v: Value = serde_json::from_slice(body).map_err(|_| ErrorCode::RefreshFailed)?;
    let mut models = Vec::new();
    for m in listed(&v, "models")? {
        let name = m.get("display_name").and_then(Value::as_str);
        let mut entry = json!({"id": text(m, "slug")?, "name": name});
        if let Some(levels) = m
            .get("supported_reasoning_levels")
            .and_then(Value::as_array)
        {
            let efforts: Result<Vec<&str>, ErrorCode> =
                levels.iter().map(|l| text(l, "effort")).collect();
            entry["efforts"] = json!(efforts?);
        }
        models.push(entry);
    }
    Ok(models)
}

/// The array under `key`: `refresh_failed` when absent, `catalog_limit` past the count bound.
fn listed<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, ErrorCode> {
    let list = v
        .get(key)
        .and_then(Value::as_array)
        .ok_or(ErrorCode::RefreshFailed)?;
    if list.len() > CATALOG_MODELS {
        return Err(ErrorCode::CatalogLimit);
    }
    Ok(list)
}

/// The string under `key`: `refresh_failed` when absent, `catalog_limit` when empty or past
/// the string bound.
fn text<'a>(m: &'a Value, key: &str) -> Result<&'a str, ErrorCode> {
    let s = m
        .get(key)
        .and_then(Value::as_str)
        .ok_or(ErrorCode::RefreshFailed)?;
    if s.is_empty() || s.len() > CATALOG_STRING_BYTES {
        return Err(ErrorCode::CatalogLimit);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn models(n: usize, id_len: usize) -> Vec<u8> {
        let list: Vec<Value> = (0..n)
            .map(|i| json!({"id": format!("{i:0>id_len$}")}))
            .collect();
        json!({"data": list}).to_string().into_bytes()
    }

    #[test]
    fn a_list_is_bounded_in_count_and_string_length_at_the_edges() {
        let (n, len) = (CATALOG_MODELS, CATALOG_STRING_BYTES);
        assert_eq!(parse_models(&models(n, 8)).unwrap().len(), n);
        assert_eq!(
            parse_models(&models(n + 1, 8)),
            Err(ErrorCode::CatalogLimit)
        );
        assert!(parse_models(&models(1, len)).is_ok());
        assert_eq!(
            parse_models(&models(1, len + 1)),
            Err(ErrorCode::CatalogLimit)
        );
        let empty = json!({"data": [{"id": ""}]}).to_string();
        assert_eq!(parse_models(empty.as_bytes()), Err(ErrorCode::CatalogLimit));
        for bad in [
            r#"{"data": [{"name": "x"}]}"#,
            r#"{"models": []}"#,
            "not json",
        ] {
            assert_eq!(
                parse_models(bad.as_bytes()),
                Err(ErrorCode::RefreshFailed),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_codex_list_takes_slugs_and_efforts_with_the_same_bounds() {
        let body = json!({"models": [
            {"slug": "gpt-5", "display_name": "GPT-5",
             "supported_reasoning_levels": [{"effort": "low"}, {"effort": "high"}]},
            {"slug": "mini"},
        ]});
        let got = parse_codex_models(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            got,
            [
                json!({"id": "gpt-5", "name": "GPT-5", "efforts": ["low", "high"]}),
                json!({"id": "mini", "name": null}),
            ]
        );
        let long = "e".repeat(CATALOG_STRING_BYTES + 1);
        let body =
            json!({"models": [{"slug": "m", "supported_reasoning_levels": [{"effort": long}]}]});
        assert_eq!(
            parse_codex_models(body.to_string().as_bytes()),
            Err(ErrorCode::CatalogLimit)
        );
        let body = json!({"models": [{"slug": "m", "supported_reasoning_levels": [{}]}]});
        assert_eq!(
            parse_codex_models(body.to_string().as_bytes()),
            Err(ErrorCode::RefreshFailed)
        );
        let many: Vec<Value> = (0..=CATALOG_MODELS)
            .map(|i| json!({"slug": format!("m{i}")}))
            .collect();
        let body = json!({"models": many}).to_string();
        assert_eq!(
            parse_codex_models(body.as_bytes()),
            Err(ErrorCode::CatalogLimit)
        );
    }
}
