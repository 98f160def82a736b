//! Schema-only definitions shared by requests, results and events: identifier grammars,
//! bounded strings and the closed code sets (`#[schemars(with = …)]` targets, never values).
//!
//! Rust fields stay plain `String`s so a typed client can build them freely; the schema
//! names the grammar and bound of each through these markers. Every bound is a
//! `protocol_core::limits` constant. `maxLength` counts code points, so a byte bound `B`
//! becomes `maxLength: B`, the tightest bound JSON Schema can state (README, "Bounds").

use protocol_core::caps::Capability;
use protocol_core::envelope::{PROTOCOL, VERSION};
use protocol_core::limits;
use protocol_core::ErrorCode;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;

/// The 64-byte ID grammar: request IDs, revisions, cursors, message and selection IDs.
const ID_PATTERN: &str = "^[A-Za-z0-9._-]+$";
/// The session-ID grammar.
const SESSION_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// A lowercase UUID, as the backend mints for instances, runs, approvals and calls.
const UUID_PATTERN: &str = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

macro_rules! def {
    ($(#[$m:meta])* $name:ident => $body:expr) => {
        $(#[$m])*
        pub struct $name;
        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                $body
            }
        }
    };
}

def!(
    /// A request ID: 1–64 ASCII bytes of `[A-Za-z0-9._-]`.
    RequestId => json_schema!({
        "description": "Request ID: 1-64 ASCII bytes of [A-Za-z0-9._-], never reused within a child.",
        "type": "string", "minLength": 1, "maxLength": limits::ID_BYTES, "pattern": ID_PATTERN
    })
);
def!(
    /// An opaque identifier in the 64-byte ID grammar (revision, cursor, message ID …).
    OpaqueId => json_schema!({
        "description": "Opaque identifier in the 64-byte ID grammar [A-Za-z0-9._-].",
        "type": "string", "minLength": 1, "maxLength": limits::ID_BYTES, "pattern": ID_PATTERN
    })
);
def!(
    /// A session ID: 1–64 ASCII bytes of `[A-Za-z0-9_-]`.
    SessionId => json_schema!({
        "description": "Session ID: 1-64 ASCII bytes of [A-Za-z0-9_-].",
        "type": "string", "minLength": 1, "maxLength": limits::SESSION_ID_BYTES,
        "pattern": SESSION_PATTERN
    })
);
def!(
    /// A backend-minted lowercase UUID.
    Uuid => json_schema!({
        "description": "A lowercase UUID minted by the backend.",
        "type": "string", "pattern": UUID_PATTERN
    })
);
def!(
    /// The context identity: SHA-256 as 64 lowercase hex characters (`decisions.md` 25).
    ContextId => json_schema!({
        "description": "SHA-256 digest of canonical cwd and storage roots, 64 lowercase hex characters.",
        "type": "string", "pattern": "^[0-9a-f]{64}$"
    })
);
def!(
    /// A provider or model name: 1–256 UTF-8 bytes.
    Name => json_schema!({
        "description": "Provider or model name: 1-256 UTF-8 bytes without control characters.",
        "type": "string", "minLength": 1, "maxLength": limits::NAME_BYTES
    })
);
def!(
    /// A catalog string (display name): at most 256 UTF-8 bytes.
    CatalogString => json_schema!({
        "description": "Sanitized catalog string, at most 256 UTF-8 bytes.",
        "type": "string", "maxLength": limits::CATALOG_STRING_BYTES
    })
);
def!(
    /// An activity, approval or diagnostic summary: at most 1,024 UTF-8 bytes after redaction.
    Summary => json_schema!({
        "description": "Redacted summary, at most 1024 UTF-8 bytes.",
        "type": "string", "maxLength": limits::SUMMARY_BYTES
    })
);
def!(
    /// A UTC RFC 3339 timestamp.
    Timestamp => json_schema!({
        "description": "UTC RFC 3339 timestamp.",
        "type": "string", "format": "date-time", "maxLength": limits::ID_BYTES
    })
);
def!(
    /// A zero-based part index.
    Part => json_schema!({
        "description": "Zero-based part index.",
        "type": "integer", "minimum": 0, "maximum": limits::HISTORY_SNAPSHOT_PARTS
    })
);
def!(
    /// A paged request's `limit`: 1–100.
    PageLimit => json_schema!({
        "description": "Entries requested: 1-100 (default 100).",
        "type": "integer", "minimum": 1, "maximum": limits::PAGE_LIMIT_MAX
    })
);
def!(
    /// A non-negative count.
    Count => json_schema!({ "type": "integer", "minimum": 0 })
);
def!(
    /// Every error code the backend writes: the closed set of `ErrorCode`.
    ErrorCodeName => {
        let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        json_schema!({ "description": "Error code (closed set).", "type": "string", "enum": codes })
    }
);
def!(
    /// The startup error codes (`status.readiness` after a failed startup).
    StartupCode => {
        let codes: Vec<&str> =
            ErrorCode::ALL.iter().filter(|c| c.is_startup()).map(|c| c.as_str()).collect();
        json_schema!({ "description": "A startup error code (closed set).", "type": "string", "enum": codes })
    }
);
def!(
    /// Every capability name, base names first.
    CapabilityName => {
        let names: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        json_schema!({ "description": "Capability name (closed set).", "type": "string", "enum": names })
    }
);
def!(
    /// The notice codes results carry (protocol "Owned sessions", "selection.set", catalog).
    Notice => json_schema!({
        "description": "Notice code (closed set).",
        "type": "string",
        "enum": NOTICES
    })
);

/// Every notice code the protocol names, in byte order.
pub const NOTICES: &[&str] = &[
    "catalog_entries_omitted_unsafe",
    "cwd_unverified",
    "history_unavailable",
    "metadata_update_failed",
    "provider_catalog_unavailable",
    "saved_selection_notice",
    "saved_selection_unavailable",
    "selection_normalized",
    "sessions_omitted_invalid",
];

/// The literal `true` (`accepted`, `recorded`, `cancellation_requested`, `durable` …).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct True;

impl Serialize for True {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(true)
    }
}

impl<'de> Deserialize<'de> for True {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if bool::deserialize(d)? {
            Ok(Self)
        } else {
            Err(serde::de::Error::custom("expected true"))
        }
    }
}

impl JsonSchema for True {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "True".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "const": true })
    }
}

/// A string constant on the wire (`protocol`, `type`, `scope`, `source`).
macro_rules! literal {
    ($(#[$m:meta])* $name:ident => $value:expr) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = Cow::<'de, str>::deserialize(d)?;
                if s == $value {
                    Ok(Self)
                } else {
                    Err(serde::de::Error::custom(concat!("expected ", stringify!($name))))
                }
            }
        }
        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "const": $value })
            }
        }
    };
}

literal!(
    /// `"magi-code.local-agent"`.
    Protocol => PROTOCOL
);
literal!(
    /// `"session"`: the only `selection.set` scope.
    ScopeSession => "session"
);
literal!(
    /// `"cache_only"`: the only `model.catalog` source.
    CacheOnly => "cache_only"
);
literal!(
    /// `"response"`: the frame type of responses.
    TypeResponse => "response"
);
literal!(
    /// `"event"`: the frame type of events.
    TypeEvent => "event"
);

/// The protocol version, `1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Version;

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(VERSION)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if u64::deserialize(d)? == VERSION {
            Ok(Self)
        } else {
            Err(serde::de::Error::custom("unknown protocol version"))
        }
    }
}

impl JsonSchema for Version {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Version".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "integer", "const": VERSION })
    }
}

/// A frame body (a result, an event's data) as JSON: its `wire` type, serialized, so the
/// compiler and the schema check its shape rather than a hand-written `json!`.
#[must_use]
pub fn body<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}
