//! What the Streamable HTTP transport asks of authorization (`backend.md` "MCP servers over
//! HTTP"): the `Authorization` header of the next request, and one refresh after a `401`.
//! A static bearer (`bearer_token_env`) never refreshes; saved OAuth tokens
//! (`MC_HOME/mcp-tokens.json`) refresh and are saved before use. Types only: the transport
//! (`mcp/http*.rs`) and the token store (`mcp/tokens*.rs`) meet here.

/// Why a server cannot be authorized: at initialization `mcp_unavailable`, mid-session a
/// failed call with a `diagnostic` `mcp_auth_required`. Carries no token or path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// No token is saved for the server (or the variable `bearer_token_env` names is unset).
    Missing,
    /// The token was refused (a `401` after a refresh, or no refresh token to try).
    Refused,
    /// The refresh request failed (network, status, or a body that is not a token answer).
    RefreshFailed,
    /// The token file could not be read or written.
    Store,
}

/// The authorization of one HTTP server's requests.
pub trait Authorize: Send {
    /// The `Authorization` header value for the next request (`Bearer …`), `None` for none;
    /// may refresh first (a saved token that expires within 60 s).
    ///
    /// # Errors
    /// When no usable token can be had.
    fn header(&mut self) -> Result<Option<String>, AuthError>;

    /// After a `401`: refreshes once and says whether a retry may go (`Ok(true)`); a static
    /// bearer or a token without a refresh token answers `Ok(false)`.
    ///
    /// # Errors
    /// When the refresh itself failed or was refused.
    fn refresh_after_401(&mut self) -> Result<bool, AuthError>;
}

/// No authorization: no header, nothing to refresh.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoAuth;

impl Authorize for NoAuth {
    fn header(&mut self) -> Result<Option<String>, AuthError> {
        Ok(None)
    }

    fn refresh_after_401(&mut self) -> Result<bool, AuthError> {
        Ok(false)
    }
}
