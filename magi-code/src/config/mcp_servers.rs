//! `mcp.servers` (`backend.md` "MCP servers" and "MCP servers over HTTP"): each definition is
//! the stdio form (`command`) or the Streamable HTTP form (`url`), strictly validated, and
//! kept as its canonical JSON (the approval hash's input).

use super::invalid::{obj, string, Invalid};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most headers of one HTTP server, `headers` and `env_headers` together (`decisions.md` 42).
pub const MAX_HEADERS: usize = 32;

type R<T> = Result<T, Invalid>;

/// An MCP server definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The canonical definition (sorted keys, `enabled` excluded) as JSON text.
    pub canonical: String,
    /// Whether the merged settings enable it.
    pub enabled: bool,
}

fn is_provider_name(s: &str) -> bool {
    protocol_core::ids::is_id_grammar(s)
}

/// Every server of `mcp.servers`, by name.
pub(super) fn parse(servers: &Value) -> R<BTreeMap<String, McpServer>> {
    let servers = servers.as_object().ok_or(Invalid("mcp servers"))?;
    let mut out = BTreeMap::new();
    for (name, def) in servers {
        if !is_provider_name(name) {
            return Err(Invalid("mcp server name"));
        }
        let d = def.as_object().ok_or(Invalid("mcp server"))?;
        match (d.contains_key("command"), d.contains_key("url")) {
            (true, true) => return Err(Invalid("mcp url and command")),
            (_, true) => http(def)?,
            _ => stdio(def)?,
        }
        let enabled = match d.get("enabled") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(Invalid("mcp enabled")),
        };
        let mut canon = d.clone();
        canon.remove("enabled");
        canon.insert("name".into(), Value::String(name.clone()));
        // serde_json's Map is a BTreeMap here: keys serialize sorted.
        let canonical = serde_json::to_string(&canon).map_err(|_| Invalid("mcp"))?;
        out.insert(name.clone(), McpServer { canonical, enabled });
    }
    Ok(out)
}

/// `{command, args?, env?, enabled?}`.
fn stdio(def: &Value) -> R<()> {
    let d = obj(def, &["command", "args", "env", "enabled"])?;
    string(d.get("command").ok_or(Invalid("mcp command"))?)?;
    if let Some(a) = d.get("args") {
        a.as_array()
            .ok_or(Invalid("mcp args"))?
            .iter()
            .try_for_each(|x| x.as_str().map(|_| ()).ok_or(Invalid("mcp arg")))?;
    }
    if let Some(e) = d.get("env") {
        e.as_object()
            .ok_or(Invalid("mcp env"))?
            .values()
            .try_for_each(|x| x.as_str().map(|_| ()).ok_or(Invalid("mcp env value")))?;
    }
    Ok(())
}

/// `{url, headers?, env_headers?, bearer_token_env?, oauth?, enabled?}`.
fn http(def: &Value) -> R<()> {
    let d = obj(
        def,
        &[
            "url",
            "headers",
            "env_headers",
            "bearer_token_env",
            "oauth",
            "enabled",
        ],
    )?;
    let url = string(d.get("url").ok_or(Invalid("mcp url"))?)?;
    check_url(&url)?;
    let mut names: Vec<String> = Vec::new();
    for (key, value_ok) in [
        ("headers", header_value as fn(&str) -> bool),
        ("env_headers", is_var_name),
    ] {
        let Some(h) = d.get(key) else { continue };
        for (k, v) in h.as_object().ok_or(Invalid("mcp headers"))? {
            let v = v.as_str().ok_or(Invalid("mcp header value"))?;
            if !is_token(k) || !value_ok(v) {
                return Err(Invalid("mcp header"));
            }
            let lower = k.to_ascii_lowercase();
            if names.contains(&lower) {
                return Err(Invalid("mcp header twice"));
            }
            names.push(lower);
        }
    }
    if names.len() > MAX_HEADERS {
        return Err(Invalid("too many mcp headers"));
    }
    // One source of `Authorization`: a header of its own, or the bearer, or the token.
    let authorizes = d.contains_key("bearer_token_env") || d.contains_key("oauth");
    if authorizes && names.iter().any(|n| n == "authorization") {
        return Err(Invalid("mcp authorization twice"));
    }
    if let Some(v) = d.get("bearer_token_env") {
        if !v.as_str().is_some_and(is_var_name) {
            return Err(Invalid("mcp bearer_token_env"));
        }
    }
    if let Some(o) = d.get("oauth") {
        if d.contains_key("bearer_token_env") {
            return Err(Invalid("mcp bearer and oauth"));
        }
        oauth(o)?;
    }
    Ok(())
}

/// `{client_id?, scopes?, callback_port?}`.
fn oauth(v: &Value) -> R<()> {
    let o: &Map<String, Value> = obj(v, &["client_id", "scopes", "callback_port"])?;
    if let Some(c) = o.get("client_id") {
        string(c)?;
    }
    if let Some(s) = o.get("scopes") {
        s.as_array()
            .ok_or(Invalid("mcp scopes"))?
            .iter()
            .try_for_each(|x| string(x).map(|_| ()))?;
    }
    if let Some(p) = o.get("callback_port") {
        p.as_u64()
            .filter(|p| (1..=65_535).contains(p))
            .ok_or(Invalid("mcp callback_port"))?;
    }
    Ok(())
}

/// `https://` anywhere, `http://` only to a loopback host (`decisions.md` 42); no user info.
fn check_url(url: &str) -> R<()> {
    let lower = url.to_ascii_lowercase();
    let (plain, rest) = if lower.starts_with("https://") {
        (false, &url[8..])
    } else if lower.starts_with("http://") {
        (true, &url[7..])
    } else {
        return Err(Invalid("mcp url scheme"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') || url.parse::<ureq::http::Uri>().is_err() {
        return Err(Invalid("mcp url"));
    }
    let host = host_of(authority).ok_or(Invalid("mcp url host"))?;
    if plain && !is_loopback(host) {
        return Err(Invalid("mcp url not https"));
    }
    Ok(())
}

/// The host of `host[:port]` or `[v6][:port]`, None when empty or the port is not a number.
fn host_of(authority: &str) -> Option<&str> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']')?;
            let port = match after {
                "" => None,
                a => Some(a.strip_prefix(':')?),
            };
            (h, port)
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok());
    (!host.is_empty() && port_ok).then_some(host)
}

/// `localhost`, an IPv4 literal in 127.0.0.0/8, or `::1`.
#[must_use]
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|a| a.octets()[0] == 127)
        || host
            .parse::<Ipv6Addr>()
            .is_ok_and(|a| a == Ipv6Addr::LOCALHOST)
}

/// An HTTP field name (RFC 9110 token).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value: printable, no line break, at most 8 KiB.
fn header_value(s: &str) -> bool {
    s.len() <= 8192 && !s.chars().any(char::is_control)
}

/// An environment variable name.
fn is_var_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && s.len() <= 256
}

#[cfg(test)]
mod tests;
