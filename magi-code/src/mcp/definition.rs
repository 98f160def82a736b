//! A server definition, read back from its canonical JSON (`config/mcp_servers.rs` validated
//! it): a stdio child (`command`) or a Streamable HTTP endpoint (`url`).

use super::server::StdioDef;
use serde_json::Value;

/// One approved, enabled server's definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Definition {
    /// A child process over stdio.
    Stdio(StdioDef),
    /// A Streamable HTTP endpoint.
    Http(HttpDef),
}

/// The `url` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpDef {
    /// The server's name in `mcp.servers`.
    pub name: String,
    /// The endpoint every message is POSTed to.
    pub url: String,
    /// Static headers, sent as they are.
    pub headers: Vec<(String, String)>,
    /// Headers whose values are read from these variables at initialization.
    pub env_headers: Vec<(String, String)>,
    /// The variable holding a static bearer token.
    pub bearer_token_env: Option<String>,
    /// Whether the server's token comes from `magi-code mcp login` (`oauth` is present).
    pub oauth: bool,
    /// Where its saved token lives (`MC_HOME`, set by startup; not part of the definition).
    pub token_home: Option<std::path::PathBuf>,
}

impl Definition {
    /// The server's name.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Stdio(d) => &d.name,
            Self::Http(d) => &d.name,
        }
    }

    /// Parses a canonical definition; None if it is not one.
    #[must_use]
    pub fn from_canonical(canonical: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(canonical).ok()?;
        if v.get("url").is_none() {
            return StdioDef::from_canonical(canonical).map(Self::Stdio);
        }
        let pairs = |key: &str| -> Option<Vec<(String, String)>> {
            v.get(key).map_or(Some(Vec::new()), |h| {
                h.as_object()?
                    .iter()
                    .map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned())))
                    .collect()
            })
        };
        let headers = pairs("headers")?;
        // Static header values are the user's credentials as often as not: redaction knows
        // them, so they cannot reach a frame.
        for (_, value) in &headers {
            crate::util::redact::register_secret(value);
        }
        Some(Self::Http(HttpDef {
            name: v.get("name")?.as_str()?.to_owned(),
            url: v.get("url")?.as_str()?.to_owned(),
            headers,
            env_headers: pairs("env_headers")?,
            bearer_token_env: match v.get("bearer_token_env") {
                None => None,
                Some(b) => Some(b.as_str()?.to_owned()),
            },
            oauth: v.get("oauth").is_some(),
            token_home: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_read_back() {
        let Some(Definition::Http(h)) = Definition::from_canonical(
            r#"{"bearer_token_env":"T","env_headers":{"X-K":"V"},"headers":{"X-A":"1"},"name":"web","url":"https://h/mcp"}"#,
        ) else {
            panic!("not http");
        };
        assert_eq!(h.name, "web");
        assert_eq!(h.url, "https://h/mcp");
        assert_eq!(h.headers, vec![("X-A".into(), "1".into())]);
        assert_eq!(h.env_headers, vec![("X-K".into(), "V".into())]);
        assert_eq!(h.bearer_token_env.as_deref(), Some("T"));
        assert!(!h.oauth);
        let o = Definition::from_canonical(r#"{"name":"o","oauth":{},"url":"https://h/"}"#);
        assert!(matches!(
            o,
            Some(Definition::Http(HttpDef { oauth: true, .. }))
        ));
        let s = Definition::from_canonical(r#"{"command":"x","name":"n"}"#).unwrap();
        assert_eq!(s.name(), "n");
        assert!(matches!(s, Definition::Stdio(_)));
        assert!(Definition::from_canonical(r#"{"name":"n","url":5}"#).is_none());
    }
}
