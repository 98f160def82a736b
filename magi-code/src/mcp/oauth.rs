//! MCP authorization (`backend.md` "MCP servers over HTTP"): the sans-IO half in [`wire`]
//! (PKCE `S256`, discovery metadata, dynamic registration, the token requests and their
//! answers), the ureq transport in [`transport`], the saved-token
//! [`Authorize`](super::auth::Authorize) in [`authorize`], and `magi-code mcp login` in
//! [`login`]. See `docs/mcp.md` "Tokens".

pub mod authorize;
pub mod login;
pub mod transport;
pub mod url;
pub mod wire;

pub use authorize::{oauth_authorize, OAuthAuthorize};
