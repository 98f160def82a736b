//! The sans-IO half of MCP authorization: PKCE `S256`, discovery metadata (RFC 9728, RFC
//! 8414, OpenID), dynamic registration (RFC 7591), the token requests (with RFC 8707
//! `resource`) and their answers. No I/O but reading `/dev/urandom`.

use super::super::auth::AuthError;
use super::super::tokens::Token;
use super::url;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{self, Read};

/// A saved token that expires within this is refreshed before it is sent.
pub const EARLY_REFRESH_MS: u64 = 60_000;
/// Largest answer body read from a metadata, registration or token endpoint.
pub const BODY_BYTES: u64 = 1 << 20;
/// The longest token or client value kept from an answer.
pub const VALUE_BYTES: usize = 16 * 1024;

/// A request to send: a `POST` of `body` as `content_type` to `url`.
#[derive(Clone, PartialEq, Eq)]
pub struct Post {
    /// Where it goes.
    pub url: String,
    /// `application/x-www-form-urlencoded` or `application/json`.
    pub content_type: &'static str,
    /// The encoded body (it may hold a secret: never printed).
    pub body: String,
}

/// A PKCE pair (RFC 7636), method `S256`.
#[derive(Clone, PartialEq, Eq)]
pub struct Pkce {
    /// The `code_verifier` sent with the code.
    pub verifier: String,
    /// `BASE64URL(SHA256(verifier))`, the `code_challenge`.
    pub challenge: String,
}

impl Pkce {
    /// The pair of a given verifier.
    #[must_use]
    pub fn from_verifier(verifier: &str) -> Self {
        Self {
            verifier: verifier.to_owned(),
            challenge: crate::util::b64::encode(&Sha256::digest(verifier.as_bytes())),
        }
    }

    /// A pair on a fresh 256-bit verifier (43 characters).
    ///
    /// # Errors
    /// When the system's randomness cannot be read.
    pub fn random() -> io::Result<Self> {
        Ok(Self::from_verifier(&random_string()?))
    }
}

/// 32 bytes of `/dev/urandom`, base64url (a verifier or a `state`).
///
/// # Errors
/// When `/dev/urandom` cannot be read.
pub fn random_string() -> io::Result<String> {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(crate::util::b64::encode(&b))
}

/// Protected resource metadata (RFC 9728), the parts login uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceMetadata {
    /// The resource identifier, the RFC 8707 `resource` of every token request.
    pub resource: Option<String>,
    /// Issuer URLs of the authorization servers (the first is used).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`, asked for when `oauth.scopes` is absent.
    pub scopes_supported: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn allowed_url(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    url::Url::parse(s)
        .filter(url::Url::is_allowed)
        .map(|_| s.to_owned())
}

/// Parses protected resource metadata; `None` when it is not an object naming an allowed
/// authorization server.
#[must_use]
pub fn parse_resource_metadata(body: &[u8]) -> Option<ResourceMetadata> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let servers: Vec<String> = strings(v.get("authorization_servers"))
        .into_iter()
        .filter(|s| url::Url::parse(s).is_some_and(|u| u.is_allowed()))
        .collect();
    if servers.is_empty() {
        return None;
    }
    Some(ResourceMetadata {
        resource: v.get("resource").and_then(Value::as_str).map(str::to_owned),
        authorization_servers: servers,
        scopes_supported: strings(v.get("scopes_supported")),
    })
}

/// Authorization server metadata (RFC 8414 or OpenID discovery), the parts login uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMetadata {
    /// Where the browser goes.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// RFC 7591 dynamic registration, if offered.
    pub registration_endpoint: Option<String>,
}

/// Parses authorization server metadata; `None` without allowed (`https`, or `http` to a
/// loopback address) authorization and token endpoints, or when it lists
/// `code_challenge_methods_supported` without `S256`.
#[must_use]
pub fn parse_server_metadata(body: &[u8]) -> Option<ServerMetadata> {
    let v: Value = serde_json::from_slice(body).ok()?;
    if v.get("code_challenge_methods_supported").is_some()
        && !strings(v.get("code_challenge_methods_supported"))
            .iter()
            .any(|m| m == "S256")
    {
        return None;
    }
    Some(ServerMetadata {
        authorization_endpoint: allowed_url(v.get("authorization_endpoint"))?,
        token_endpoint: allowed_url(v.get("token_endpoint"))?,
        registration_endpoint: allowed_url(v.get("registration_endpoint")),
    })
}

/// The `resource_metadata` parameter of a `WWW-Authenticate: Bearer …` header (RFC 9728 §5.1).
#[must_use]
pub fn resource_metadata_param(header: &str) -> Option<String> {
    let i = header.find("resource_metadata=")?;
    let rest = &header[i + "resource_metadata=".len()..];
    let value = match rest.strip_prefix('"') {
        Some(q) => &q[..q.find('"')?],
        None => rest.split([',', ' ']).next()?,
    };
    url::Url::parse(value)
        .filter(url::Url::is_allowed)
        .map(|_| value.to_owned())
}

/// The well-known addresses of an issuer's metadata, in the order tried: RFC 8414 (path
/// inserted, then root), then OpenID discovery (inserted, then appended, then root).
#[must_use]
pub fn server_metadata_urls(issuer: &str) -> Vec<String> {
    let Some(u) = url::Url::parse(issuer) else {
        return Vec::new();
    };
    let mut out = u.well_known("oauth-authorization-server");
    let oidc = u.well_known("openid-configuration");
    let path = u.path.trim_end_matches('/');
    if path.is_empty() {
        out.extend(oidc);
    } else {
        out.push(oidc[0].clone());
        out.push(format!(
            "{}{path}/.well-known/openid-configuration",
            u.origin()
        ));
        out.push(oidc[1].clone());
    }
    out
}

/// The RFC 7591 registration of a public client with one loopback redirect.
#[must_use]
pub fn registration_request(endpoint: &str, redirect_uri: &str, scopes: &[String]) -> Post {
    let mut body = json!({
        "client_name": "magi-code",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if !scopes.is_empty() {
        body["scope"] = Value::String(scopes.join(" "));
    }
    Post {
        url: endpoint.to_owned(),
        content_type: "application/json",
        body: body.to_string(),
    }
}

fn bounded_str(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= VALUE_BYTES)
        .map(str::to_owned)
}

/// The `client_id` (and `client_secret`, if any) of a registration answer.
#[must_use]
pub fn parse_registration(status: u16, body: &[u8]) -> Option<(String, Option<String>)> {
    if !(200..300).contains(&status) {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    Some((
        bounded_str(v.get("client_id"))?,
        bounded_str(v.get("client_secret")),
    ))
}

/// What the browser opens: the authorization endpoint with the code request (RFC 6749 §4.1.1,
/// PKCE, RFC 8707 `resource`).
#[must_use]
pub fn authorization_url(
    endpoint: &str,
    client_id: &str,
    redirect_uri: &str,
    pkce: &Pkce,
    state: &str,
    resource: &str,
    scopes: &[String],
) -> String {
    let scope = scopes.join(" ");
    let mut pairs = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("code_challenge", pkce.challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", state),
        ("resource", resource),
    ];
    if !scope.is_empty() {
        pairs.push(("scope", &scope));
    }
    let sep = if endpoint.contains('?') { '&' } else { '?' };
    format!("{endpoint}{sep}{}", url::form(&pairs))
}

/// The form post of a token request, with the client's credentials (a secret, if the client
/// has one, goes as `client_secret_post`).
fn token_post<'a>(
    endpoint: &str,
    mut pairs: Vec<(&'a str, &'a str)>,
    secret: Option<&'a str>,
) -> Post {
    if let Some(s) = secret {
        pairs.push(("client_secret", s));
    }
    Post {
        url: endpoint.to_owned(),
        content_type: "application/x-www-form-urlencoded",
        body: url::form(&pairs),
    }
}

/// The authorization code exchange (RFC 6749 §4.1.3 with PKCE and `resource`).
#[must_use]
pub fn code_request(token: &Token, code: &str, redirect_uri: &str, verifier: &str) -> Post {
    let pairs = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("client_id", token.client_id.as_str()),
        ("code_verifier", verifier),
        ("resource", token.resource.as_str()),
    ];
    token_post(&token.token_endpoint, pairs, token.client_secret.as_deref())
}

/// The refresh of a saved token (`grant_type=refresh_token` with `resource`, RFC 8707);
/// `None` without a refresh token.
#[must_use]
pub fn refresh_request(token: &Token) -> Option<Post> {
    let refresh = token.refresh_token.as_deref()?;
    let pairs = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh),
        ("client_id", token.client_id.as_str()),
        ("resource", token.resource.as_str()),
    ];
    Some(token_post(
        &token.token_endpoint,
        pairs,
        token.client_secret.as_deref(),
    ))
}

/// A successful token answer (RFC 6749 §5.1).
#[derive(Clone, PartialEq, Eq)]
pub struct TokenAnswer {
    /// The new access token.
    pub access_token: String,
    /// A new (rotated) refresh token, if one came.
    pub refresh_token: Option<String>,
    /// `expires_in` in milliseconds, if given.
    pub expires_in_ms: Option<u64>,
    /// The granted scopes, if given.
    pub scopes: Option<Vec<String>>,
}

/// Reads a token endpoint's answer: a 2xx JSON with a bearer `access_token`, else
/// `Refused` for a `400`/`401` (RFC 6749 §5.2: `invalid_grant` and kin) and `RefreshFailed`
/// for anything else.
///
/// # Errors
/// As above.
pub fn parse_token_response(status: u16, body: &[u8]) -> Result<TokenAnswer, AuthError> {
    if status == 400 || status == 401 {
        return Err(AuthError::Refused);
    }
    if !(200..300).contains(&status) {
        return Err(AuthError::RefreshFailed);
    }
    let v: Value = serde_json::from_slice(body).map_err(|_| AuthError::RefreshFailed)?;
    let bearer = match v.get("token_type") {
        None => true,
        Some(t) => t.as_str().is_some_and(|t| t.eq_ignore_ascii_case("bearer")),
    };
    let access_token = bounded_str(v.get("access_token")).filter(|_| bearer);
    let access_token = access_token.ok_or(AuthError::RefreshFailed)?;
    let expires_in_ms = match v.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(e) => Some(
            e.as_u64()
                .or_else(|| e.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
                .ok_or(AuthError::RefreshFailed)?
                .saturating_mul(1000),
        ),
    };
    Ok(TokenAnswer {
        access_token,
        refresh_token: bounded_str(v.get("refresh_token")),
        expires_in_ms,
        scopes: v.get("scope").and_then(Value::as_str).map(|s| {
            s.split(' ')
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect()
        }),
    })
}

/// `old` updated by a refresh answered at `now_ms`: a rotated refresh token replaces the old
/// one, an absent one keeps it.
#[must_use]
pub fn refreshed(old: &Token, answer: TokenAnswer, now_ms: u64) -> Token {
    Token {
        access_token: answer.access_token,
        refresh_token: answer.refresh_token.or_else(|| old.refresh_token.clone()),
        expires_at_ms: answer.expires_in_ms.map(|e| now_ms.saturating_add(e)),
        scopes: answer.scopes.unwrap_or_else(|| old.scopes.clone()),
        ..old.clone()
    }
}

/// Whether `token` expires within [`EARLY_REFRESH_MS`] of `now_ms` (unknown expiry: no).
#[must_use]
pub fn expires_soon(token: &Token, now_ms: u64) -> bool {
    token
        .expires_at_ms
        .is_some_and(|at| at <= now_ms.saturating_add(EARLY_REFRESH_MS))
}

#[cfg(test)]
mod tests;
