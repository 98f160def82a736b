//! The one error of a settings value, shared by the settings reader and the readers of the
//! parts it delegates (hooks, profile and skill names, instructions, MCP servers), with the
//! two shape checks the settings and MCP server readers share.

/// A settings problem; reported as `configuration_invalid` without detail on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

use serde_json::{Map, Value};

type R<T> = Result<T, Invalid>;

/// `v` as an object whose keys are all `allowed`.
pub(super) fn obj<'a>(v: &'a Value, allowed: &[&str]) -> R<&'a Map<String, Value>> {
    let m = v.as_object().ok_or(Invalid("not an object"))?;
    if m.keys().all(|k| allowed.contains(&k.as_str())) {
        Ok(m)
    } else {
        Err(Invalid("unknown key"))
    }
}

/// A settings string: not empty, at most 4 KiB, no control character.
pub(super) fn string(v: &Value) -> R<String> {
    match v.as_str() {
        Some(s) if !s.is_empty() && s.len() <= 4096 && !s.chars().any(char::is_control) => {
            Ok(s.to_owned())
        }
        _ => Err(Invalid("bad string")),
    }
}
