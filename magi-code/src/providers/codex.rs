//! The `codex` provider's credentials (`backend.md` "Providers", `decisions.md` 43): the
//! Codex CLI's `auth.json`, the access token's expiry, and the locked refresh that re-reads
//! the file, asks the token endpoint only when no other process refreshed meanwhile, and
//! writes the answer back so the Codex CLI keeps working. Parsing is sans-IO; the file and
//! the one `POST` are separate.

use crate::util::cancel::Cancel;
use serde_json::{json, Map, Value};
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The Codex CLI's OAuth client.
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The token endpoint's origin unless `providers.codex.auth_url` says otherwise.
pub const DEFAULT_AUTH_URL: &str = "https://auth.openai.com";
/// Most bytes of `auth.json` read.
pub const AUTH_FILE_BYTES: u64 = 64 << 10;
/// An access token expiring within this is refreshed before it is used.
pub const EXPIRY_SKEW_MS: i64 = 60_000;
/// Most bytes of a token endpoint answer read.
const ANSWER_BYTES: u64 = 64 << 10;
/// Error codes that mean the refresh token is spent for good.
const REFUSED_CODES: [&str; 3] = [
    "refresh_token_expired",
    "refresh_token_reused",
    "refresh_token_invalidated",
];

/// `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`.
#[must_use]
pub fn auth_path() -> Option<PathBuf> {
    let home = match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".codex"),
    };
    Some(home.join("auth.json"))
}

/// The tokens of a ChatGPT sign-in.
#[derive(Clone, PartialEq, Eq)]
pub struct Tokens {
    /// The bearer token of requests (a JWT).
    pub access_token: String,
    /// A non-empty refresh token, if the file holds one.
    pub refresh_token: Option<String>,
    /// The `chatgpt-account-id` header's value.
    pub account_id: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a token.
        f.debug_struct("Tokens")
            .field("refreshable", &self.refresh_token.is_some())
            .finish_non_exhaustive()
    }
}

/// The tokens of an `auth.json` body; `None` when it is not JSON or holds no `tokens` with an
/// access token (an API-key login only).
#[must_use]
pub fn parse(bytes: &[u8]) -> Option<Tokens> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let t = v.get("tokens")?;
    let s = |k: &str| {
        t.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Some(Tokens {
        access_token: s("access_token")?,
        refresh_token: s("refresh_token"),
        account_id: s("account_id"),
    })
}

/// A JWT's `exp` claim in milliseconds since the epoch (no signature check).
#[must_use]
pub fn jwt_exp_ms(token: &str) -> Option<i64> {
    let payload = crate::util::b64::decode(token.split('.').nth(1)?)?;
    let claims: Value = serde_json::from_slice(&payload).ok()?;
    let exp = claims.get("exp")?;
    let secs = exp.as_i64().or_else(|| exp.as_f64().map(|f| f as i64))?;
    secs.checked_mul(1000)
}

/// Whether the access token expires within 60 s of `now_ms` (or its expiry is unreadable).
#[must_use]
pub fn needs_refresh(t: &Tokens, now_ms: i64) -> bool {
    jwt_exp_ms(&t.access_token).is_none_or(|exp| exp - now_ms <= EXPIRY_SKEW_MS)
}

/// Readiness: the access token expires more than 60 s from `now_ms`, or a refresh token is
/// present.
#[must_use]
pub fn ready(t: &Tokens, now_ms: i64) -> bool {
    t.refresh_token.is_some() || !needs_refresh(t, now_ms)
}

/// Reads at most [`AUTH_FILE_BYTES`] of `path`; `None` when missing, unreadable or larger.
fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    // O_NONBLOCK: a FIFO in the file's place must fail the metadata check, not block.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(AUTH_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= AUTH_FILE_BYTES).then_some(bytes)
}

/// The file's tokens, known to redaction from now on.
#[must_use]
pub fn load(path: &Path) -> Option<Tokens> {
    let bytes = read_bounded(path)?;
    register(&bytes);
    parse(&bytes)
}

/// Registers every token string of an `auth.json` body (or a token answer) with redaction.
fn register(bytes: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let tokens = v.get("tokens").unwrap_or(&v);
    for k in ["id_token", "access_token", "refresh_token"] {
        if let Some(s) = tokens
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            crate::util::redact::register_secret(s);
        }
    }
}

/// Whether the `codex` provider is locally ready now (one bounded read, no request).
#[must_use]
pub fn ready_now() -> bool {
    auth_path()
        .and_then(|p| load(&p))
        .is_some_and(|t| ready(&t, crate::util::time::now_ms()))
}

/// The JSON body of the refresh grant.
#[must_use]
pub fn grant(refresh_token: &str) -> Value {
    json!({
        "client_id": CLIENT_ID,
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "scope": "openid profile email",
    })
}

/// Why a refresh did not give new tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshError {
    /// The sign-in is spent or gone: only `codex login` helps.
    Refused,
    /// The token endpoint could not be reached.
    Unreachable,
    /// Another status, or a malformed answer (status 200).
    Status(u16),
    /// The run was cancelled while the refresh went on (it still finishes and is stored).
    Cancelled,
}

/// Whether a token endpoint error body names a spent refresh token: `error.code`, `error`
/// (a string) or `code`.
#[must_use]
pub fn refused_body(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let codes = [
        v.get("error").and_then(|e| e.get("code")),
        v.get("error"),
        v.get("code"),
    ];
    codes
        .iter()
        .filter_map(|c| c.and_then(Value::as_str))
        .any(|c| REFUSED_CODES.contains(&c))
}

/// The answered tokens of a token endpoint answer (`access_token` required; `id_token` and
/// `refresh_token` where given), or why there are none.
pub fn answer(status: u16, body: &[u8]) -> Result<Map<String, Value>, RefreshError> {
    if status == 401 || refused_body(body) {
        return Err(RefreshError::Refused);
    }
    if status != 200 {
        return Err(RefreshError::Status(status));
    }
    let v: Value = serde_json::from_slice(body).map_err(|_| RefreshError::Status(status))?;
    let mut out = Map::new();
    for k in ["id_token", "access_token", "refresh_token"] {
        if let Some(s) = v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()) {
            out.insert(k.to_owned(), json!(s));
        }
    }
    if !out.contains_key("access_token") {
        return Err(RefreshError::Status(status));
    }
    Ok(out)
}

/// `now` as RFC 3339 UTC with microseconds, as `last_refresh` is written.
#[must_use]
pub fn last_refresh(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(d.as_secs()).unwrap_or(0);
    let whole = crate::util::time::rfc3339(secs * 1000);
    format!("{}.{:06}Z", whole.trim_end_matches('Z'), d.subsec_micros())
}

/// The `auth.json` body after a refresh: `original` with the answered tokens put into
/// `tokens` and `last_refresh` set; every other member kept. `None` if `original` is not an
/// object.
#[must_use]
pub fn written(original: &[u8], answered: &Map<String, Value>, now: SystemTime) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(original).ok()?;
    let root = v.as_object_mut()?;
    let tokens = root
        .entry("tokens")
        .or_insert_with(|| Value::Object(Map::new()));
    if !tokens.is_object() {
        *tokens = Value::Object(Map::new());
    }
    let t = tokens.as_object_mut()?;
    for (k, val) in answered {
        t.insert(k.clone(), val.clone());
    }
    root.insert("last_refresh".into(), json!(last_refresh(now)));
    serde_json::to_vec_pretty(&v).ok()
}

/// A signed-in account as one run uses it: where its file is, and its current tokens.
#[derive(Debug)]
pub struct Codex {
    path: PathBuf,
    auth_url: String,
    tokens: Option<Tokens>,
}

impl Codex {
    /// The account of the file at `path`, refreshed at `{auth_url}/oauth/token`.
    #[must_use]
    pub fn new(path: PathBuf, auth_url: &str) -> Self {
        Self {
            path,
            auth_url: auth_url.trim_end_matches('/').to_owned(),
            tokens: None,
        }
    }

    /// Makes sure the access token does not expire within 60 s: refreshes (locked) if it does.
    pub fn fresh(&mut self, cancel: &Cancel) -> Result<(), RefreshError> {
        if self.tokens.is_none() {
            // Under the lock: a refresh killed before its rename left the answer beside.
            if let Ok(_lock) = self.lock() {
                self.adopt();
            }
            self.tokens = Some(load(&self.path).ok_or(RefreshError::Refused)?);
        }
        match &self.tokens {
            Some(t) if !needs_refresh(t, crate::util::time::now_ms()) => Ok(()),
            _ => self.refresh(cancel),
        }
    }

    /// After a `401`: one refresh (or the tokens another process refreshed meanwhile).
    pub fn after_unauthorized(&mut self, cancel: &Cancel) -> Result<(), RefreshError> {
        self.refresh(cancel)
    }

    /// Runs the refresh on its own thread: a cancelled run returns at once, while the
    /// refresh goes on to its end and stores its answer (once sent, the old refresh token
    /// may be spent).
    fn refresh(&mut self, cancel: &Cancel) -> Result<(), RefreshError> {
        let mut worker = Self {
            path: self.path.clone(),
            auth_url: self.auth_url.clone(),
            tokens: self.tokens.clone(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = worker.refresh_now().map(|()| worker.tokens);
            // The run may have stopped waiting: the answer is in the file either way.
            let _ = tx.send(r);
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(r) => {
                    self.tokens = r?;
                    return Ok(());
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(RefreshError::Refused)
                }
                Err(_) if cancel.is_cancelled() => return Err(RefreshError::Cancelled),
                Err(_) => {}
            }
        }
    }

    /// Under the lock on `auth.json.lock`: the file's tokens if another process replaced ours
    /// with fresh ones, else one refresh grant, written back.
    fn refresh_now(&mut self) -> Result<(), RefreshError> {
        let lock = self.lock()?;
        self.adopt();
        let result = self.refresh_locked();
        drop(lock);
        result
    }

    /// The exclusive lock on `auth.json.lock`, held while the file is read to refresh and
    /// written back.
    fn lock(&self) -> Result<std::fs::File, RefreshError> {
        let lock_path = self.path.with_file_name("auth.json.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&lock_path)
            .map_err(|_| RefreshError::Refused)?;
        lock.lock().map_err(|_| RefreshError::Refused)?;
        Ok(lock)
    }

    /// Under the lock: a complete `auth.json` of ours newer than the file, left beside it by
    /// a refresh killed between its temp file and the rename, replaces it (the answer's
    /// rotated refresh token is the one that still works).
    fn adopt(&self) {
        let complete = |b: &[u8]| parse(b).is_some();
        drop(crate::store::adopt_leftover(
            &self.path,
            AUTH_FILE_BYTES,
            complete,
        ));
    }

    fn refresh_locked(&mut self) -> Result<(), RefreshError> {
        let original = read_bounded(&self.path).ok_or(RefreshError::Refused)?;
        register(&original);
        let current = parse(&original).ok_or(RefreshError::Refused)?;
        let ours = self.tokens.as_ref().map(|t| t.access_token.as_str());
        if ours != Some(current.access_token.as_str())
            && !needs_refresh(&current, crate::util::time::now_ms())
        {
            self.tokens = Some(current);
            return Ok(());
        }
        let refresh_token = current
            .refresh_token
            .as_deref()
            .ok_or(RefreshError::Refused)?;
        let (status, body) = self.post(refresh_token)?;
        register(&body);
        let answered = answer(status, &body)?;
        let bytes =
            written(&original, &answered, SystemTime::now()).ok_or(RefreshError::Refused)?;
        let mode = std::fs::metadata(&self.path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600);
        // A failed write keeps the new tokens for this run; the file then holds spent ones.
        let _ = write_back(&self.path, &bytes, mode);
        self.tokens = parse(&bytes);
        self.tokens
            .as_ref()
            .map(|_| ())
            .ok_or(RefreshError::Refused)
    }

    /// The one `POST {auth_url}/oauth/token`: its status and body (bounded).
    fn post(&self, refresh_token: &str) -> Result<(u16, Vec<u8>), RefreshError> {
        let agent =
            crate::util::http::bounded_agent(Duration::from_secs(10), Duration::from_secs(30));
        let url = format!("{}/oauth/token", self.auth_url);
        let resp = agent
            .post(&url)
            .header("content-type", "application/json")
            .send(grant(refresh_token).to_string().as_bytes())
            .map_err(|_| RefreshError::Unreachable)?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        resp.into_body()
            .into_reader()
            .take(ANSWER_BYTES)
            .read_to_end(&mut body)
            .map_err(|_| RefreshError::Unreachable)?;
        Ok((status, body))
    }

    /// Adds the account's headers: bearer token, account ID, originator and, for a turn's
    /// step, the session ID.
    pub fn authorize<B>(
        &self,
        mut req: ureq::RequestBuilder<B>,
        session_id: Option<&str>,
    ) -> ureq::RequestBuilder<B> {
        if let Some(t) = &self.tokens {
            req = req.header("authorization", &format!("Bearer {}", t.access_token));
            if let Some(a) = &t.account_id {
                req = req.header("chatgpt-account-id", a);
            }
        }
        req = req.header("originator", "magi-code");
        match session_id {
            Some(s) => req.header("session_id", s),
            None => req,
        }
    }
}

/// Replaces `path` with `bytes` at `mode`: temp file beside it, fsync, rename.
fn write_back(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    crate::store::replace_atomically(path, bytes, Some(mode), crate::store::Sweep::Beside)
        .map(|_| ())
}

/// Writes `bytes` to a fresh file at `path` (tests).
#[cfg(test)]
fn put(path: &Path, bytes: &[u8], mode: u32) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(mode)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
