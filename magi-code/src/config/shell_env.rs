//! `shell_env` settings (`backend.md` "Tools and approvals"): `keep`, the names the secrets
//! rule would withhold from the children (`shell`, hooks, MCP servers, the Code Mode helper)
//! but the user passes on anyway. A project's `keep` replaces the global one (arrays are not
//! merged).

use super::invalid::Invalid;
use serde_json::Value;

/// Most names `shell_env.keep` lists.
pub const KEEP_MAX: usize = 64;
/// Longest name kept.
pub const NAME_BYTES: usize = 256;

/// Reads a `shell_env` value: `{"keep"?: [name]}`, at most [`KEEP_MAX`] names, each a
/// non-empty variable name (no `=`, no control character, at most [`NAME_BYTES`]).
///
/// # Errors
/// An unknown key, a wrong type, too many names or a name that is not one.
pub fn parse(v: &Value) -> Result<Vec<String>, Invalid> {
    let m = v.as_object().ok_or(Invalid("shell_env"))?;
    if m.keys().any(|k| k != "keep") {
        return Err(Invalid("shell_env key"));
    }
    let Some(keep) = m.get("keep") else {
        return Ok(Vec::new());
    };
    let names = keep.as_array().ok_or(Invalid("shell_env.keep"))?;
    if names.len() > KEEP_MAX {
        return Err(Invalid("shell_env.keep over 64 names"));
    }
    names
        .iter()
        .map(|n| match n.as_str() {
            Some(s)
                if !s.is_empty()
                    && s.len() <= NAME_BYTES
                    && !s.contains('=')
                    && !s.chars().any(char::is_control) =>
            {
                Ok(s.to_owned())
            }
            _ => Err(Invalid("shell_env.keep name")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keep_takes_64_names_and_refuses_the_65th_and_bad_shapes() {
        let names = |n: usize| (0..n).map(|i| format!("V{i}")).collect::<Vec<_>>();
        assert_eq!(parse(&json!({"keep": names(64)})).unwrap(), names(64));
        assert!(parse(&json!({"keep": names(65)})).is_err());
        assert_eq!(parse(&json!({})).unwrap(), Vec::<String>::new());
        let long = "K".repeat(NAME_BYTES);
        assert_eq!(parse(&json!({"keep": [long]})).unwrap().len(), 1);
        for bad in [
            json!({"keep": ["K".repeat(NAME_BYTES + 1)]}),
            json!({"keep": [""]}),
            json!({"keep": ["A=B"]}),
            json!({"keep": ["A\nB"]}),
            json!({"keep": [1]}),
            json!({"keep": "GITHUB_TOKEN"}),
            json!({"kept": []}),
            json!([]),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
