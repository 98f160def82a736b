//! `providers.codex.auth_url`: the token endpoint's origin of the built-in provider that
//! signs in with the Codex CLI (overridable for tests), besides what every built-in HTTP
//! provider takes (`providers::Row::settings_keys`).

use super::invalid::Invalid;
use serde_json::{Map, Value};

/// `auth_url`, if given: a non-empty string of at most 4096 bytes without control characters
/// (as every settings string).
pub(super) fn auth_url(c: &Map<String, Value>) -> Result<Option<String>, Invalid> {
    match c.get("auth_url") {
        None => Ok(None),
        Some(Value::String(u))
            if !u.is_empty() && u.len() <= 4096 && !u.chars().any(char::is_control) =>
        {
            Ok(Some(u.clone()))
        }
        Some(_) => Err(Invalid("auth_url")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::settings::{load, Settings};
    use serde_json::json;

    fn parsed(v: serde_json::Value) -> Option<Settings> {
        load(v.as_object().cloned(), None).ok()
    }

    #[test]
    fn codex_takes_base_url_and_auth_url_and_no_other_provider_does() {
        let s = parsed(
            json!({"providers": {"codex": {"base_url": "http://127.0.0.1:1/c",
            "auth_url": "http://127.0.0.1:2", "max_output_tokens": 100}}}),
        )
        .unwrap();
        assert_eq!(
            s.builtin_base_urls.get("codex").unwrap(),
            "http://127.0.0.1:1/c"
        );
        assert_eq!(s.codex_auth_url.as_deref(), Some("http://127.0.0.1:2"));
        assert_eq!(s.max_output_tokens_of("codex"), 100);
        assert!(parsed(json!({"providers": {"openai": {"auth_url": "http://x"}}})).is_none());
        assert!(parsed(json!({"providers": {"codex": {"auth_url": 5}}})).is_none());
        assert!(parsed(json!({"providers": {"codex": {"auth_url": ""}}})).is_none());
        assert!(parsed(json!({"providers": {"codex": {"api_key_env": "X"}}})).is_none());
    }
}
