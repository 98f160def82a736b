//! A saved OAuth token as the HTTP transport's [`Authorize`]: sent as `Bearer`, refreshed
//! first when it expires within 60 s (unless it has no refresh token: then it is sent as it
//! is, `decisions.md` 42), refreshed once after a `401`. A token this process refreshed is
//! then used until it expires (one rotation per start for short-lived tokens, not one per
//! request). A refresh re-reads the file under its
//! lock (another process may have refreshed already), and saves the new tokens before they
//! are used.

use super::super::auth::{AuthError, Authorize};
use super::super::tokens::{Token, Tokens};
use super::transport;
use super::wire::{expires_soon, parse_token_response, refresh_request, refreshed, Post};
use crate::util::clock::{Clock, RealClock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// How a token request is sent: its status and body, or `Err` when no answer came.
pub type SendToken = Box<dyn FnMut(&Post) -> Result<(u16, Vec<u8>), ()> + Send>;

/// One server's saved token, refreshed as needed.
pub struct OAuthAuthorize {
    mc_home: PathBuf,
    name: String,
    url: String,
    token: Token,
    clock: Arc<dyn Clock + Send + Sync>,
    /// The clock's instant and the Unix milliseconds it stood for.
    epoch: (Instant, u64),
    send: SendToken,
    /// The token was refreshed (or taken fresh from the file) by this process: it is used
    /// until it has expired, not refreshed again within its last 60 s, so a server whose
    /// tokens live under a minute is not sent a rotation before every request.
    fresh: bool,
}

impl std::fmt::Debug for OAuthAuthorize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthAuthorize")
            .field("name", &self.name)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// The saved-token authorization of server `name` at `url`, on the real clock and network:
/// what the Streamable HTTP transport builds for a server with `oauth`.
///
/// # Errors
/// `Missing` when no token is saved for this name and URL, `Store` when the file is unusable.
pub fn oauth_authorize(
    mc_home: &Path,
    name: &str,
    url: &str,
) -> Result<Box<dyn Authorize>, AuthError> {
    let now_ms = u64::try_from(crate::util::time::now_ms()).unwrap_or(0);
    let send: SendToken = Box::new(|p: &Post| transport::post_token(p).map_err(|_| ()));
    let a = OAuthAuthorize::new(mc_home, name, url, Arc::new(RealClock), now_ms, send)?;
    Ok(Box::new(a))
}

impl OAuthAuthorize {
    /// Reads the token saved for `name` at `url`; `now_ms` is the Unix time at `clock.now()`.
    ///
    /// # Errors
    /// As [`oauth_authorize`].
    pub fn new(
        mc_home: &Path,
        name: &str,
        url: &str,
        clock: Arc<dyn Clock + Send + Sync>,
        now_ms: u64,
        send: SendToken,
    ) -> Result<Self, AuthError> {
        let url = super::url::canonical(url).ok_or(AuthError::Missing)?;
        let store = Tokens::lock(mc_home).map_err(|_| AuthError::Store)?;
        let token = store.get(name, &url).cloned().ok_or(AuthError::Missing)?;
        drop(store);
        remember(&token);
        let epoch = (clock.now(), now_ms);
        Ok(Self {
            mc_home: mc_home.to_path_buf(),
            name: name.to_owned(),
            url,
            token,
            clock,
            epoch,
            send,
            fresh: false,
        })
    }

    fn now_ms(&self) -> u64 {
        let passed = self.clock.now().saturating_duration_since(self.epoch.0);
        self.epoch
            .1
            .saturating_add(u64::try_from(passed.as_millis()).unwrap_or(u64::MAX))
    }

    /// Refreshes under the lock: a token another process saved meanwhile (not expiring) is
    /// taken as it is; otherwise the refresh answer is saved, then used.
    fn refresh(&mut self) -> Result<(), AuthError> {
        let mut store = Tokens::lock(&self.mc_home).map_err(|_| AuthError::Store)?;
        let saved = store
            .get(&self.name, &self.url)
            .cloned()
            .ok_or(AuthError::Missing)?;
        let now = self.now_ms();
        if saved.access_token != self.token.access_token && !expires_soon(&saved, now) {
            remember(&saved);
            self.token = saved;
            self.fresh = true;
            return Ok(());
        }
        let post = refresh_request(&saved).ok_or(AuthError::Refused)?;
        let (status, body) = (self.send)(&post).map_err(|()| AuthError::RefreshFailed)?;
        let answer = parse_token_response(status, &body)?;
        let fresh = refreshed(&saved, answer, self.now_ms());
        remember(&fresh);
        store
            .put(&self.name, fresh.clone())
            .map_err(|_| AuthError::Store)?;
        self.token = fresh;
        self.fresh = true;
        Ok(())
    }
}

/// Registers a token's secrets with redaction, so a server echoing one cannot carry it into
/// a frame, history record or model input.
fn remember(t: &Token) {
    let secrets = [
        Some(&t.access_token),
        t.refresh_token.as_ref(),
        t.client_secret.as_ref(),
    ];
    for s in secrets.into_iter().flatten() {
        crate::util::redact::register_secret(s);
    }
}

impl Authorize for OAuthAuthorize {
    fn header(&mut self) -> Result<Option<String>, AuthError> {
        let now = self.now_ms();
        let due = if self.fresh {
            self.token.expires_at_ms.is_some_and(|at| at <= now)
        } else {
            expires_soon(&self.token, now)
        };
        if self.token.refresh_token.is_some() && due {
            self.refresh()?;
        }
        Ok(Some(format!("Bearer {}", self.token.access_token)))
    }

    fn refresh_after_401(&mut self) -> Result<bool, AuthError> {
        if self.token.refresh_token.is_none() {
            return Ok(false);
        }
        self.refresh().map(|()| true)
    }
}

#[cfg(test)]
mod tests;
