//! The authorization of one HTTP server's requests, built from its definition: a static
//! bearer from `bearer_token_env`, saved OAuth tokens for `oauth` (the token store's hook),
//! or none. Called only for approved servers, at initialization (`decisions.md` 41).

use super::auth::{AuthError, Authorize, NoAuth};
use super::definition::HttpDef;

/// `Authorization: Bearer <value of bearer_token_env>`; a `401` is final (nothing to refresh).
pub struct StaticBearer {
    header: String,
}

impl std::fmt::Debug for StaticBearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StaticBearer(..)")
    }
}

impl StaticBearer {
    /// A bearer of `token` (registered with redaction, so it cannot reach a frame).
    #[must_use]
    pub fn new(token: &str) -> Self {
        crate::util::redact::register_secret(token);
        Self {
            header: format!("Bearer {token}"),
        }
    }
}

impl Authorize for StaticBearer {
    fn header(&mut self) -> Result<Option<String>, AuthError> {
        Ok(Some(self.header.clone()))
    }

    fn refresh_after_401(&mut self) -> Result<bool, AuthError> {
        Ok(false)
    }
}

/// The authorization of `def`'s requests, reading the environment now (never stored).
///
/// # Errors
/// [`AuthError::Missing`] when `bearer_token_env` names an unset (or non-UTF-8, or empty)
/// variable or an `oauth` server has no saved token; the refresh's errors.
pub fn authorizer(def: &HttpDef) -> Result<Box<dyn Authorize>, AuthError> {
    if let Some(var) = &def.bearer_token_env {
        let token = std::env::var(var).map_err(|_| AuthError::Missing)?;
        if token.is_empty() || token.chars().any(char::is_control) {
            return Err(AuthError::Missing);
        }
        return Ok(Box::new(StaticBearer::new(&token)));
    }
    if def.oauth {
        // The token `magi-code mcp login` saved, refreshed first when it expires within 60 s;
        // none saved (or no MC_HOME given) is `mcp_unavailable`, never a prompt.
        let home = def.token_home.as_deref().ok_or(AuthError::Missing)?;
        return super::oauth::oauth_authorize(home, &def.name, &def.url);
    }
    Ok(Box::new(NoAuth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_bearer_sends_its_header_and_never_refreshes() {
        let mut b = StaticBearer::new("tok-123");
        assert_eq!(b.header(), Ok(Some("Bearer tok-123".into())));
        assert_eq!(b.refresh_after_401(), Ok(false));
        assert!(!format!("{b:?}").contains("tok-123"));
    }

    #[test]
    fn an_unset_bearer_variable_or_an_oauth_server_has_no_authorization_yet() {
        let def = |bearer: Option<&str>, oauth| HttpDef {
            name: "s".into(),
            url: "https://h/".into(),
            headers: Vec::new(),
            env_headers: Vec::new(),
            bearer_token_env: bearer.map(str::to_owned),
            oauth,
            token_home: None,
        };
        let unset = "MAGI_TEST_SURELY_UNSET_BEARER_VAR";
        assert_eq!(
            authorizer(&def(Some(unset), false)).err(),
            Some(AuthError::Missing)
        );
        assert_eq!(authorizer(&def(None, true)).err(), Some(AuthError::Missing));
        let mut none = authorizer(&def(None, false)).unwrap();
        assert_eq!(none.header(), Ok(None));
    }
}
