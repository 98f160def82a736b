//! A request body as bytes whose prefix stays the same from step to step (`runner.md` 1
//! "Prompt caching"): every member but the conversation in one fixed (key) order, the
//! conversation last, so a step's body is the previous one's with the new items appended.

use serde_json::Value;

/// `body` serialized with the member `last` (the conversation: `messages` or `input`) at the
/// end and every other member before it in key order.
#[must_use]
pub fn stable(body: &Value, last: &str) -> String {
    let Value::Object(m) = body else {
        return body.to_string();
    };
    let mut out = String::from("{");
    let mut first = true;
    let mut member = |k: &str, v: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&Value::String(k.to_owned()).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    };
    for (k, v) in m.iter().filter(|(k, _)| k.as_str() != last) {
        member(k, v);
    }
    if let Some(v) = m.get(last) {
        member(last, v);
    }
    out.push('}');
    out
}

/// `body` as a provider with `prompt_caching: false` gets it (`runner.md` 1): no
/// `cache_control` member anywhere, and an Anthropic `system` of text blocks as one plain
/// string (proxies translating the Anthropic wire forward block lists other servers refuse).
#[must_use]
pub fn uncached(body: &Value) -> Value {
    let mut out = without_cache_control(body);
    if let Some(Value::Array(blocks)) = out.get("system") {
        let text: Option<Vec<&str>> = blocks
            .iter()
            .map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        if let Some(parts) = text {
            out["system"] = Value::String(parts.concat());
        }
    }
    out
}

/// `body` without any `cache_control` member, at any depth: what prefix comparisons read.
#[must_use]
pub fn without_cache_control(body: &Value) -> Value {
    match body {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_control(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_conversation_goes_last_and_the_rest_in_key_order() {
        let b = json!({"model": "m", "messages": [1, 2], "tools": [], "max_tokens": 5});
        let s = stable(&b, "messages");
        assert_eq!(
            s,
            r#"{"max_tokens":5,"model":"m","tools":[],"messages":[1,2]}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), b);
        // The next step's body is this one with its items appended.
        let next = json!({"model": "m", "messages": [1, 2, 3], "tools": [], "max_tokens": 5});
        let n = stable(&next, "messages");
        assert!(n.starts_with(&s[..s.len() - 2]), "{n}");
        assert_eq!(stable(&json!({"a": 1}), "messages"), r#"{"a":1}"#);
    }

    #[test]
    fn cache_control_members_go_at_any_depth() {
        let b = json!({"system": [{"text": "x", "cache_control": {"type": "ephemeral"}}]});
        assert_eq!(
            without_cache_control(&b),
            json!({"system": [{"text": "x"}]})
        );
    }
}
