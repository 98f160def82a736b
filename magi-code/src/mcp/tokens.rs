//! Saved MCP OAuth tokens: `MC_HOME/mcp-tokens.json` (`backend.md` "MCP servers over HTTP",
//! layout in `docs/mcp.md` "Tokens"): owner-only (0600), replaced atomically (temp file, fsync,
//! rename) while an exclusive `flock` on `mcp-tokens.json.lock` is held; the lock file stays
//! (`decisions.md` 43); a complete temp file newer than the file, left by a writer killed
//! before its rename, is adopted at the next lock. Entries are keyed by server name and the lowercase hex SHA-256 of the
//! server's canonical URL, so a token is never sent to a URL it was not issued for.

use crate::store::{adopt_leftover, replace_atomically, Sweep};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The token file's name in `MC_HOME`.
pub const TOKENS_FILE: &str = "mcp-tokens.json";
/// The lock file beside it.
pub const LOCK_FILE: &str = "mcp-tokens.json.lock";
/// Largest token file read (and written).
pub const TOKENS_FILE_BYTES: u64 = 1 << 20;
/// The layout's version.
pub const VERSION: u64 = 1;

/// One server's saved token. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    /// The server's canonical URL (the key's hash is of this).
    pub url: String,
    /// The bearer access token.
    pub access_token: String,
    /// The refresh token, if one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, Unix milliseconds (`None`: unknown, never refreshed early).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// Where refreshes go.
    pub token_endpoint: String,
    /// The OAuth client the token was issued to.
    pub client_id: String,
    /// The client secret, when dynamic registration issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The RFC 8707 `resource` every token request names.
    pub resource: String,
    /// The scopes granted (or asked for).
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("url", &self.url)
            .field("refresh_token", &self.refresh_token.is_some())
            .field("expires_at_ms", &self.expires_at_ms)
            .field("token_endpoint", &self.token_endpoint)
            .finish_non_exhaustive()
    }
}

/// Why the token file could not be used. Carries neither its content nor a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreError {
    /// It is not the documented layout (not JSON, wrong shape, not a regular file).
    Corrupt,
    /// It is larger than [`TOKENS_FILE_BYTES`].
    TooLarge,
    /// Reading, locking or writing failed.
    Io,
}

impl StoreError {
    /// The error code a command prints.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            Self::Corrupt => "token_file_invalid",
            Self::TooLarge => "token_file_too_large",
            Self::Io => "token_file_unavailable",
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layout {
    version: u64,
    /// server name → SHA-256 of the canonical URL → token.
    servers: BTreeMap<String, BTreeMap<String, Token>>,
}

/// The lowercase hex SHA-256 of a canonical URL: the second half of an entry's key.
#[must_use]
pub fn url_key(canonical_url: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(canonical_url.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The token file of one `MC_HOME`, opened under its lock.
#[derive(Debug)]
pub struct Tokens {
    path: PathBuf,
    layout: Layout,
    _lock: File,
}

impl Tokens {
    /// Takes the exclusive lock (waiting for another holder) and reads the file (absent:
    /// empty). `MC_HOME` is created owner-only when missing.
    ///
    /// # Errors
    /// A file that cannot be read, locked or parsed.
    pub fn lock(mc_home: &Path) -> Result<Self, StoreError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(mc_home)
            .map_err(|_| StoreError::Io)?;
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(mc_home.join(LOCK_FILE))
            .map_err(|_| StoreError::Io)?;
        lock.lock().map_err(|_| StoreError::Io)?;
        let path = mc_home.join(TOKENS_FILE);
        // A refresh killed between its temp file and the rename left the answer there: the
        // spent token must not win over it (issue 25 item 8).
        drop(adopt_leftover(&path, TOKENS_FILE_BYTES, |b| {
            parse(b).is_ok()
        }));
        let layout = read(&path)?;
        Ok(Self {
            path,
            layout,
            _lock: lock,
        })
    }

    /// The token saved for `name` at `canonical_url`.
    #[must_use]
    pub fn get(&self, name: &str, canonical_url: &str) -> Option<&Token> {
        self.layout.servers.get(name)?.get(&url_key(canonical_url))
    }

    /// Every saved token of `name`, whatever its URL.
    pub fn of(&self, name: &str) -> impl Iterator<Item = &Token> {
        self.layout
            .servers
            .get(name)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// Saves `token` as `name`'s only token (one for an older URL is dropped) and writes the
    /// file before returning.
    ///
    /// # Errors
    /// When the file cannot be written (it is then unchanged).
    pub fn put(&mut self, name: &str, token: Token) -> Result<(), StoreError> {
        let key = url_key(&token.url);
        let entry = self.layout.servers.entry(name.to_owned()).or_default();
        entry.clear();
        entry.insert(key, token);
        self.write()
    }

    /// Removes every token of `name`; whether there was one.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn remove(&mut self, name: &str) -> Result<bool, StoreError> {
        if self.layout.servers.remove(name).is_none() {
            return Ok(false);
        }
        self.write().map(|()| true)
    }

    fn write(&mut self) -> Result<(), StoreError> {
        self.layout.version = VERSION;
        let mut data = serde_json::to_vec_pretty(&self.layout).map_err(|_| StoreError::Io)?;
        data.push(b'\n');
        if data.len() as u64 > TOKENS_FILE_BYTES {
            return Err(StoreError::TooLarge);
        }
        replace_atomically(&self.path, &data, Some(0o600), Sweep::Beside)
            .map(|_| ())
            .map_err(|_| StoreError::Io)
    }
}

fn read(path: &Path) -> Result<Layout, StoreError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Layout::default()),
        Err(_) => return Err(StoreError::Io),
    };
    if !file.metadata().map_err(|_| StoreError::Io)?.is_file() {
        return Err(StoreError::Corrupt);
    }
    let mut bytes = Vec::new();
    file.take(TOKENS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| StoreError::Io)?;
    if bytes.len() as u64 > TOKENS_FILE_BYTES {
        return Err(StoreError::TooLarge);
    }
    parse(&bytes)
}

/// The layout of a whole token file.
fn parse(bytes: &[u8]) -> Result<Layout, StoreError> {
    let layout: Layout = serde_json::from_slice(bytes).map_err(|_| StoreError::Corrupt)?;
    if layout.version != VERSION {
        return Err(StoreError::Corrupt);
    }
    Ok(layout)
}

#[cfg(test)]
mod tests;
