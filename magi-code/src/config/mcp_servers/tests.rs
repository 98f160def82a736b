use super::*;
use serde_json::json;

fn one(def: Value) -> R<McpServer> {
    parse(&json!({ "s": def })).map(|mut m| m.remove("s").unwrap())
}

fn ok(def: Value) -> bool {
    one(def).is_ok()
}

fn url(u: &str) -> bool {
    ok(json!({ "url": u }))
}

#[test]
fn the_http_form_is_canonical_like_the_stdio_form() {
    let s = one(json!({
        "url": "https://mcp.example.com/mcp",
        "headers": {"X-B": "1", "X-A": "2"},
        "env_headers": {"X-Key": "MY_KEY"},
        "bearer_token_env": "TOKEN",
        "enabled": true
    }))
    .unwrap();
    assert!(s.enabled);
    assert_eq!(
        s.canonical,
        r#"{"bearer_token_env":"TOKEN","env_headers":{"X-Key":"MY_KEY"},"headers":{"X-A":"2","X-B":"1"},"name":"s","url":"https://mcp.example.com/mcp"}"#
    );
    let o = one(json!({"url": "https://h/", "oauth": {"scopes": ["b", "a"], "client_id": "c", "callback_port": 8765}}))
        .unwrap();
    assert_eq!(
        o.canonical,
        r#"{"name":"s","oauth":{"callback_port":8765,"client_id":"c","scopes":["b","a"]},"url":"https://h/"}"#
    );
    assert!(!o.enabled);
    let stdio = one(json!({"command": "node", "args": ["x"]})).unwrap();
    assert_eq!(
        stdio.canonical,
        r#"{"args":["x"],"command":"node","name":"s"}"#
    );
}

#[test]
fn url_and_command_together_unknown_keys_and_wrong_types_are_refused() {
    assert!(!ok(json!({"url": "https://h/", "command": "node"})));
    assert!(!ok(json!({"url": "https://h/", "args": []})));
    assert!(!ok(json!({"command": "node", "headers": {}})));
    assert!(!ok(json!({"url": "https://h/", "header": {}})));
    assert!(!ok(json!({"url": 5})));
    assert!(!ok(json!({"url": "https://h/", "headers": []})));
    assert!(!ok(json!({"url": "https://h/", "headers": {"X": 1}})));
    assert!(!ok(
        json!({"url": "https://h/", "headers": {"X": "a\r\nY: b"}})
    ));
    assert!(!ok(
        json!({"url": "https://h/", "headers": {"bad name": "v"}})
    ));
    assert!(!ok(
        json!({"url": "https://h/", "env_headers": {"X": "not a var"}})
    ));
    assert!(!ok(
        json!({"url": "https://h/", "headers": {"X": "1"}, "env_headers": {"x": "V"}})
    ));
    assert!(!ok(json!({"url": "https://h/", "bearer_token_env": 3})));
    assert!(!ok(json!({"url": "https://h/", "bearer_token_env": ""})));
    assert!(!ok(json!({"url": "https://h/", "enabled": "yes"})));
    assert!(!ok(json!({"url": "https://h/", "oauth": {"scope": []}})));
    assert!(!ok(json!({"url": "https://h/", "oauth": {"scopes": "a"}})));
    assert!(!ok(
        json!({"url": "https://h/", "oauth": {"callback_port": 0}})
    ));
    assert!(!ok(
        json!({"url": "https://h/", "oauth": {"callback_port": 65_536}})
    ));
    assert!(ok(
        json!({"url": "https://h/", "oauth": {"callback_port": 65_535}})
    ));
    assert!(ok(json!({"url": "https://h/", "oauth": {}})));
    assert!(!ok(
        json!({"url": "https://h/", "oauth": {}, "bearer_token_env": "T"})
    ));
    assert!(ok(json!({"url": "https://h/", "headers": {"X": ""}})));
    assert!(ok(
        json!({"url": "https://h/", "headers": {"Authorization": "Basic x"}})
    ));
    assert!(!ok(
        json!({"url": "https://h/", "headers": {"authorization": "Basic x"}, "bearer_token_env": "T"})
    ));
    assert!(!ok(
        json!({"url": "https://h/", "env_headers": {"Authorization": "V"}, "oauth": {}})
    ));
}

#[test]
fn headers_and_env_headers_hold_32_together() {
    let mut h = Map::new();
    let mut e = Map::new();
    for i in 0..16 {
        h.insert(format!("X-H{i}"), json!("v"));
        e.insert(format!("X-E{i}"), json!("VAR"));
    }
    assert!(ok(
        json!({"url": "https://h/", "headers": h, "env_headers": e})
    ));
    e.insert("X-E16".into(), json!("VAR"));
    assert!(!ok(
        json!({"url": "https://h/", "headers": h, "env_headers": e})
    ));
    let many: Map<String, Value> = (0..33).map(|i| (format!("X-{i}"), json!("v"))).collect();
    assert!(!ok(json!({"url": "https://h/", "headers": many})));
    // The bearer's Authorization does not count.
    let full: Map<String, Value> = (0..32).map(|i| (format!("X-{i}"), json!("v"))).collect();
    assert!(ok(
        json!({"url": "https://h/", "headers": full, "bearer_token_env": "T"})
    ));
}

#[test]
fn plain_http_goes_only_to_a_loopback_address() {
    for good in [
        "https://mcp.example.com/mcp",
        "https://[2001:db8::1]:8443/mcp",
        "HTTPS://example.com",
        "http://localhost:3001/mcp",
        "http://LOCALHOST/mcp",
        "http://127.0.0.1:9/mcp",
        "http://127.255.255.255/",
        "http://127.0.0.0",
        "http://[::1]:3001/mcp",
        "http://[::1]/mcp",
    ] {
        assert!(url(good), "{good}");
    }
    for bad in [
        "http://128.0.0.1/",
        "http://126.255.255.255/",
        "http://example.com/mcp",
        "http://localhost.example.com/",
        "http://[::2]/",
        "http://[::ffff:127.0.0.1]/",
        "http://10.0.0.1/",
        "ftp://localhost/",
        "localhost:3001",
        "https://",
        "https://user:pw@example.com/",
        "http://localhost:port/",
        "http://localhost:65536/",
        "http://[::1/",
        "",
    ] {
        assert!(!url(bad), "{bad}");
    }
}

#[test]
fn loopback_is_localhost_127_slash_8_or_v6_one() {
    assert!(is_loopback("localhost") && is_loopback("127.1.2.3") && is_loopback("::1"));
    assert!(!is_loopback("127.1") && !is_loopback("0.0.0.0") && !is_loopback("::"));
}
