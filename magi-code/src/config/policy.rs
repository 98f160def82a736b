//! The tool policy of one class (`tools.<class>`, `code_mode.tools.<class>`): a leaf, so the
//! settings reader and the `code_mode` reader share it without naming each other.

use super::invalid::Invalid;
use serde_json::Value;

/// Tool policy per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Run without asking.
    Allow,
    /// Ask the client; deny on expiry.
    Ask,
    /// Never run.
    Deny,
}

/// Reads `"allow"`, `"ask"` or `"deny"`; anything else is invalid.
pub fn parse(v: &Value) -> Result<Policy, Invalid> {
    match v.as_str() {
        Some("allow") => Ok(Policy::Allow),
        Some("ask") => Ok(Policy::Ask),
        Some("deny") => Ok(Policy::Deny),
        _ => Err(Invalid("bad policy")),
    }
}
