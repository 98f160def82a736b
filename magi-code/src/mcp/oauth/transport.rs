//! The thin ureq side of MCP authorization: one `GET` or `POST`, bounded in time (10 s to
//! connect, 10 s in all) and in bytes ([`BODY_BYTES`]), no redirects followed, and only to an
//! allowed URL (`https`, or `http` to a loopback address).

use super::url::Url;
use super::wire::{Post, BODY_BYTES};
use std::io::Read;
use std::time::Duration;

/// Bound of one request, connect included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// An answer: its status, its `WWW-Authenticate` header (for discovery) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The `WWW-Authenticate` header, if any.
    pub www_authenticate: Option<String>,
    /// The body, at most [`BODY_BYTES`].
    pub body: Vec<u8>,
}

/// Why a request got no answer (connection, timeout, a body over the bound, a URL not allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreachable;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(REQUEST_TIMEOUT))
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

fn check(url: &str) -> Result<(), Unreachable> {
    match Url::parse(url) {
        Some(u) if u.is_allowed() => Ok(()),
        _ => Err(Unreachable),
    }
}

fn answer(resp: ureq::http::Response<ureq::Body>) -> Result<Answer, Unreachable> {
    let status = resp.status().as_u16();
    let www_authenticate = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    resp.into_body()
        .into_reader()
        .take(BODY_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|_| Unreachable)?;
    if body.len() as u64 > BODY_BYTES {
        return Err(Unreachable);
    }
    Ok(Answer {
        status,
        www_authenticate,
        body,
    })
}

/// Sends `post`.
///
/// # Errors
/// [`Unreachable`] when no answer came.
pub fn post(post: &Post) -> Result<Answer, Unreachable> {
    check(&post.url)?;
    let resp = agent()
        .post(&post.url)
        .header("Content-Type", post.content_type)
        .header("Accept", "application/json")
        .send(post.body.as_bytes())
        .map_err(|_| Unreachable)?;
    answer(resp)
}

/// `GET url` asking for JSON.
///
/// # Errors
/// [`Unreachable`] when no answer came.
pub fn get(url: &str) -> Result<Answer, Unreachable> {
    check(url)?;
    let resp = agent()
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|_| Unreachable)?;
    answer(resp)
}

/// Sends a token request and returns its status and body: the form
/// `authorize`'s `OAuthAuthorize` refreshes through.
///
/// # Errors
/// [`Unreachable`] when no answer came.
pub fn post_token(p: &Post) -> Result<(u16, Vec<u8>), Unreachable> {
    post(p).map(|a| (a.status, a.body))
}
