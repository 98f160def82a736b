//! `magi-code mcp login <name>` (`backend.md` "MCP servers over HTTP", `decisions.md` 41):
//! discovery, dynamic registration when no `oauth.client_id` is set, the authorization code
//! with PKCE `S256` and a loopback redirect on `127.0.0.1`, then the token exchange with
//! `resource`, saved. The URL to open goes on its own line on stdout; the redirect is taken
//! from the loopback or from a redirect URL pasted on stdin (the browser may run on another
//! machine, over SSH), whichever comes first within 5 minutes.

use super::super::tokens::{StoreError, Token, Tokens};
use super::transport::{self, Answer};
use super::url::{self, Url};
use super::wire::{
    authorization_url, code_request, parse_registration, parse_resource_metadata,
    parse_server_metadata, parse_token_response, random_string, refreshed, registration_request,
    resource_metadata_param, server_metadata_urls, Pkce, Post, ServerMetadata,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How long login waits for the redirect.
pub const LOGIN_WAIT: Duration = Duration::from_secs(300);
/// The loopback redirect's path.
pub const CALLBACK_PATH: &str = "/callback";
/// Largest request head the loopback reads.
const HEAD_BYTES: u64 = 16 * 1024;

/// What login needs of a server's definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginConfig {
    /// The server's name in settings.
    pub name: String,
    /// Its `url`.
    pub url: String,
    /// `oauth.client_id`, skipping registration.
    pub client_id: Option<String>,
    /// `oauth.scopes`.
    pub scopes: Vec<String>,
    /// `oauth.callback_port` (else a free port).
    pub callback_port: Option<u16>,
}

/// Why login failed. Carries no token, code or secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginError {
    /// The URL is not an allowed `https` (or loopback `http`) URL.
    BadUrl,
    /// No protected resource or authorization server metadata could be had.
    Discovery,
    /// Registration was needed and failed (or is not offered).
    Registration,
    /// The loopback port could not be bound.
    Callback,
    /// No redirect came within [`LOGIN_WAIT`].
    Timeout,
    /// The authorization server answered with an `error`.
    Denied,
    /// The code exchange failed.
    Exchange,
    /// The system's randomness could not be read.
    Random,
    /// The token file could not be written.
    Store(StoreError),
}

impl LoginError {
    /// The code and sentence a command prints.
    #[must_use]
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            Self::BadUrl => (
                "mcp_url_invalid",
                "the server's url is not https (or loopback http)",
            ),
            Self::Discovery => (
                "oauth_discovery_failed",
                "no authorization metadata was found",
            ),
            Self::Registration => (
                "oauth_registration_failed",
                "client registration failed; set oauth.client_id",
            ),
            Self::Callback => (
                "oauth_callback_unavailable",
                "the loopback callback port could not be bound",
            ),
            Self::Timeout => ("oauth_timeout", "no redirect came within 5 minutes"),
            Self::Denied => (
                "oauth_denied",
                "the authorization server refused the request",
            ),
            Self::Exchange => ("oauth_exchange_failed", "the token exchange failed"),
            Self::Random => ("oauth_random_unavailable", "no randomness for PKCE"),
            Self::Store(e) => (e.code(), "the token file could not be written"),
        }
    }
}

/// What a redirect (loopback request target or pasted URL) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// The code, with the right `state`.
    Code(String),
    /// An `error`, with the right `state`.
    Error,
    /// A `state` that is not ours (or none): ignored.
    WrongState,
    /// Not a redirect at all.
    NotRedirect,
}

/// Reads a redirect URL or request target against the `state` sent.
#[must_use]
pub fn parse_redirect(s: &str, state: &str) -> Redirect {
    let s = s.trim();
    let Some((_, query)) = s.split_once('?') else {
        return Redirect::NotRedirect;
    };
    let query = query.split('#').next().unwrap_or("");
    let pairs = url::query_pairs(query);
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if get("code").is_none() && get("error").is_none() {
        return Redirect::NotRedirect;
    }
    if get("state") != Some(state) {
        return Redirect::WrongState;
    }
    match (get("error"), get("code")) {
        (None, Some(c)) if !c.is_empty() => Redirect::Code(c.to_owned()),
        _ => Redirect::Error,
    }
}

/// Where discovery led: the authorization server's endpoints, the `resource`, the scopes.
struct Found {
    meta: ServerMetadata,
    resource: String,
    scopes: Vec<String>,
}

fn json_at(url: &str) -> Option<Vec<u8>> {
    transport::get(url)
        .ok()
        .filter(|a| a.status == 200)
        .map(|a| a.body)
}

/// An unauthenticated `initialize` to the server: a `401`'s `WWW-Authenticate` may name the
/// resource metadata.
fn probe(url: &str) -> Option<String> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "magi-code", "version": env!("CARGO_PKG_VERSION")}}});
    let post = Post {
        url: url.to_owned(),
        content_type: "application/json",
        body: body.to_string(),
    };
    let a: Answer = transport::post(&post).ok()?;
    resource_metadata_param(a.www_authenticate.as_deref().filter(|_| a.status == 401)?)
}

fn discover(server: &Url, cfg: &LoginConfig) -> Result<Found, LoginError> {
    let prm = server
        .well_known("oauth-protected-resource")
        .into_iter()
        // The probe only when no well-known document answered.
        .chain(std::iter::once_with(|| probe(&cfg.url)).flatten())
        .find_map(|u| json_at(&u).and_then(|b| parse_resource_metadata(&b)))
        .ok_or(LoginError::Discovery)?;
    let meta = prm
        .authorization_servers
        .iter()
        .flat_map(|issuer| server_metadata_urls(issuer))
        .find_map(|u| json_at(&u).and_then(|b| parse_server_metadata(&b)))
        .ok_or(LoginError::Discovery)?;
    let scopes = if cfg.scopes.is_empty() {
        prm.scopes_supported
    } else {
        cfg.scopes.clone()
    };
    Ok(Found {
        meta,
        resource: prm.resource.unwrap_or_else(|| server.canonical()),
        scopes,
    })
}

fn register(
    found: &Found,
    cfg: &LoginConfig,
    redirect: &str,
) -> Result<(String, Option<String>), LoginError> {
    if let Some(id) = &cfg.client_id {
        return Ok((id.clone(), None));
    }
    let endpoint = found
        .meta
        .registration_endpoint
        .as_deref()
        .ok_or(LoginError::Registration)?;
    let a = transport::post(&registration_request(endpoint, redirect, &found.scopes))
        .map_err(|_| LoginError::Registration)?;
    parse_registration(a.status, &a.body).ok_or(LoginError::Registration)
}

/// Runs the whole login for `cfg`, printing the URL to open on `out` and guidance on `err`,
/// reading pasted redirect URLs from `input`; saves the token under `mc_home`.
///
/// # Errors
/// [`LoginError`] for the step that failed.
pub fn login(
    mc_home: &Path,
    cfg: &LoginConfig,
    input: Box<dyn Read + Send>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), LoginError> {
    let server = Url::parse(&cfg.url)
        .filter(Url::is_allowed)
        .ok_or(LoginError::BadUrl)?;
    let found = discover(&server, cfg)?;
    let listener = TcpListener::bind(("127.0.0.1", cfg.callback_port.unwrap_or(0)))
        .map_err(|_| LoginError::Callback)?;
    let port = listener
        .local_addr()
        .map_err(|_| LoginError::Callback)?
        .port();
    let redirect = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let (client_id, client_secret) = register(&found, cfg, &redirect)?;
    let pkce = Pkce::random().map_err(|_| LoginError::Random)?;
    let state = random_string().map_err(|_| LoginError::Random)?;
    let open = authorization_url(
        &found.meta.authorization_endpoint,
        &client_id,
        &redirect,
        &pkce,
        &state,
        &found.resource,
        &found.scopes,
    );
    // Output failures (a closed terminal) do not stop the wait: a pasted URL may still come.
    let _ = writeln!(
        err,
        "Open this URL in a browser to sign in to {}. If that browser cannot reach this \
         machine's 127.0.0.1:{port}, paste the address it was redirected to here.",
        cfg.name
    );
    let _ = writeln!(out, "{open}").and_then(|()| out.flush());
    let code = wait_for_code(listener, input, &state, err)?;
    let mut token = Token {
        url: server.canonical(),
        access_token: String::new(),
        refresh_token: None,
        expires_at_ms: None,
        token_endpoint: found.meta.token_endpoint.clone(),
        client_id,
        client_secret,
        resource: found.resource.clone(),
        scopes: found.scopes.clone(),
    };
    let a = transport::post(&code_request(&token, &code, &redirect, &pkce.verifier))
        .map_err(|_| LoginError::Exchange)?;
    let answer = parse_token_response(a.status, &a.body).map_err(|_| LoginError::Exchange)?;
    let now = u64::try_from(crate::util::time::now_ms()).unwrap_or(0);
    token = refreshed(&token, answer, now);
    let mut store = Tokens::lock(mc_home).map_err(LoginError::Store)?;
    store.put(&cfg.name, token).map_err(LoginError::Store)
}

/// Waits for the first redirect with our `state`, from the loopback or from `input`.
fn wait_for_code(
    listener: TcpListener,
    input: Box<dyn Read + Send>,
    state: &str,
    err: &mut dyn Write,
) -> Result<String, LoginError> {
    let (tx, rx) = mpsc::channel::<Redirect>();
    let loopback = tx.clone();
    let st = state.to_owned();
    std::thread::spawn(move || serve_callback(&listener, &st, &loopback));
    let st = state.to_owned();
    std::thread::spawn(move || read_pasted(input, &st, &tx));
    let deadline = Instant::now() + LOGIN_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Redirect::Code(c)) => return Ok(c),
            Ok(Redirect::Error) => return Err(LoginError::Denied),
            Ok(Redirect::WrongState | Redirect::NotRedirect) => {
                let _ = writeln!(
                    err,
                    "That is not the redirect of this login; still waiting."
                );
            }
            Err(RecvTimeoutError::Timeout) => return Err(LoginError::Timeout),
            // Both sources gone (cannot happen while the listener thread lives): wait out.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(left);
                return Err(LoginError::Timeout);
            }
        }
    }
}

fn read_pasted(input: Box<dyn Read + Send>, state: &str, tx: &Sender<Redirect>) {
    for line in BufReader::new(input).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        if tx.send(parse_redirect(&line, state)).is_err() {
            return;
        }
    }
}

fn serve_callback(listener: &TcpListener, state: &str, tx: &Sender<Redirect>) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let r = callback_request(&mut conn, state);
        let (status, text) = match r {
            Redirect::Code(_) => ("200 OK", "Signed in. You can close this tab."),
            Redirect::Error => ("200 OK", "Sign-in was refused. You can close this tab."),
            _ => (
                "400 Bad Request",
                "This is not the redirect of the current login.",
            ),
        };
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
        let done = matches!(r, Redirect::Code(_) | Redirect::Error);
        if matches!(r, Redirect::NotRedirect) {
            continue;
        }
        if tx.send(r).is_err() || done {
            return;
        }
    }
}

/// The redirect a loopback request carries (`GET /callback?… HTTP/1.1`).
fn callback_request(conn: &mut TcpStream, state: &str) -> Redirect {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let mut head = BufReader::new(Read::take(&mut *conn, HEAD_BYTES));
    if head.read_line(&mut line).is_err() {
        return Redirect::NotRedirect;
    }
    // Drain the rest of the head so the answer is not reset by unread bytes.
    let mut rest = String::new();
    while head.read_line(&mut rest).is_ok_and(|n| n > 2) {
        rest.clear();
    }
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) if target.starts_with(CALLBACK_PATH) => {
            parse_redirect(target, state)
        }
        _ => Redirect::NotRedirect,
    }
}
