//! Deciding whether a name is safe to show: bounded, free of control characters, and not
//! shaped like a credential.

/// Longest provider/model name returned on the wire.
pub const NAME_BYTES: usize = protocol_core::limits::NAME_BYTES;

const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "xox",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "AKIA",
    "ASIA",
    "AIza",
    "Bearer ",
    "bearer ",
    "Basic ",
    "-----BEGIN",
    "eyJ",
];

/// Whether `s` looks like a credential: a known token prefix, or a long run of base64-like
/// characters mixing letters and digits.
#[must_use]
pub fn is_secret_like(s: &str) -> bool {
    if SECRET_PREFIXES.iter().any(|p| s.contains(p)) {
        return true;
    }
    s.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
        .any(|run| {
            run.len() >= 32
                && run.bytes().any(|b| b.is_ascii_digit())
                && run.bytes().any(|b| b.is_ascii_alphabetic())
        })
}

/// The name itself if it may be shown, else `None` (over 256 bytes, empty, control-bearing or
/// secret-like).
#[must_use]
pub fn safe_name(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= NAME_BYTES
        && !s.chars().any(char::is_control)
        && !is_secret_like(s);
    ok.then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(safe_name("scripted").as_deref(), Some("scripted"));
        assert_eq!(
            safe_name("claude-sonnet-4-5-20250929").as_deref(),
            Some("claude-sonnet-4-5-20250929")
        );
        assert!(safe_name("meta-llama/Meta-Llama-3.1-8B-Instruct-Q4_K_M").is_some());
        assert!(safe_name(&"m".repeat(256)).is_some());
        assert_eq!(safe_name(&"m".repeat(257)), None);
        assert_eq!(safe_name("sk-ant-api03-abcdef"), None);
        assert_eq!(safe_name("a\u{7}b"), None);
        assert_eq!(safe_name("a\nb"), None);
        assert_eq!(safe_name("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg"), None);
        assert_eq!(safe_name(""), None);
    }
}

/// What replaces a secret-shaped token in projected text.
pub const REDACTED: &str = "[redacted]";

/// Sanitizes text for display: secret-shaped tokens become [`REDACTED`], and control
/// characters other than LF and TAB are dropped.
#[must_use]
pub fn sanitize_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut token = String::new();
    // The word after an authorization scheme is a credential whatever it looks like.
    let mut after_scheme = false;
    let mut flush = |token: &mut String, out: &mut String| {
        if token.is_empty() {
            return;
        }
        if after_scheme || is_secret_like(token) {
            out.push_str(REDACTED);
        } else {
            out.push_str(token);
        }
        let word = token
            .trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .to_ascii_lowercase();
        after_scheme = matches!(word.as_str(), "bearer" | "basic");
        token.clear();
    };
    for c in s.chars() {
        if c.is_whitespace() {
            flush(&mut token, &mut out);
            if !c.is_control() || c == '\n' || c == '\t' {
                out.push(c);
            }
        } else if c.is_control() {
            // Dropped: terminal escapes and the like never reach a frontend.
        } else {
            token.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

#[cfg(test)]
mod sanitize_tests {
    use super::*;

    #[test]
    fn text() {
        assert_eq!(
            sanitize_text("key sk-ant-abc123 here\n"),
            "key [redacted] here\n"
        );
        assert_eq!(sanitize_text("a\u{1b}[31mb\tc\r\n"), "a[31mb\tc\n");
        assert_eq!(sanitize_text("plain words"), "plain words");
        assert_eq!(
            sanitize_text("curl -H \"Authorization: Bearer abc123\" x"),
            "curl -H \"Authorization: Bearer [redacted] x"
        );
    }
}
