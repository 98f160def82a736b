//! Hex encoding and fresh opaque revisions.

/// Lowercase hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh opaque revision.
#[must_use]
pub fn fresh_revision() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
