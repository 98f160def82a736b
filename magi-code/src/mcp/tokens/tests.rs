use super::*;
use std::fs::TryLockError;
use std::os::unix::fs::PermissionsExt;

pub(crate) fn token(url: &str, access: &str) -> Token {
    Token {
        url: url.to_owned(),
        access_token: access.to_owned(),
        refresh_token: Some(format!("{access}-refresh")),
        expires_at_ms: Some(1_000_000),
        token_endpoint: "https://auth.example/token".into(),
        client_id: "client-1".into(),
        client_secret: None,
        resource: url.to_owned(),
        scopes: vec!["read".into()],
    }
}

#[test]
fn a_saved_token_is_keyed_by_name_and_url_hash_in_an_owner_only_file() {
    let home = tempfile::tempdir().unwrap();
    let mut s = Tokens::lock(home.path()).unwrap();
    s.put("docs", token("https://mcp.example/mcp", "at-1"))
        .unwrap();
    drop(s);
    let path = home.path().join(TOKENS_FILE);
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let key = crate::mcp::digest("https://mcp.example/mcp");
    assert_eq!(v["version"], 1);
    assert_eq!(v["servers"]["docs"][&key]["access_token"], "at-1");
    assert_eq!(
        v["servers"]["docs"][&key]["resource"],
        "https://mcp.example/mcp"
    );
    let s = Tokens::lock(home.path()).unwrap();
    assert_eq!(
        s.get("docs", "https://mcp.example/mcp")
            .unwrap()
            .access_token,
        "at-1"
    );
    assert!(
        s.get("docs", "https://other.example/mcp").is_none(),
        "another URL has no token"
    );
    assert!(s.get("other", "https://mcp.example/mcp").is_none());
    // Nothing but the file and its lock: the temp file was renamed into place.
    let mut names: Vec<String> = fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [TOKENS_FILE, LOCK_FILE]);
}

#[test]
fn a_new_url_replaces_the_old_token_and_remove_drops_the_name() {
    let home = tempfile::tempdir().unwrap();
    let mut s = Tokens::lock(home.path()).unwrap();
    s.put("docs", token("https://a.example", "at-a")).unwrap();
    s.put("docs", token("https://b.example", "at-b")).unwrap();
    s.put("other", token("https://a.example", "at-o")).unwrap();
    assert!(s.get("docs", "https://a.example").is_none());
    assert_eq!(s.of("docs").count(), 1);
    assert!(s.remove("docs").unwrap());
    assert!(!s.remove("docs").unwrap());
    drop(s);
    let s = Tokens::lock(home.path()).unwrap();
    assert_eq!(s.of("docs").count(), 0);
    assert_eq!(
        s.get("other", "https://a.example").unwrap().access_token,
        "at-o"
    );
}

#[test]
fn the_lock_is_held_while_the_store_is_open_and_the_lock_file_stays() {
    let home = tempfile::tempdir().unwrap();
    let s = Tokens::lock(home.path()).unwrap();
    let other = File::open(home.path().join(LOCK_FILE)).unwrap();
    assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
    drop(s);
    assert!(
        other.try_lock().is_ok(),
        "released when the store is dropped"
    );
    other.unlock().unwrap();
    assert!(home.path().join(LOCK_FILE).exists());
    // A second writer waits for the first instead of losing its write.
    let first = Tokens::lock(home.path()).unwrap();
    let dir = home.path().to_path_buf();
    let t = std::thread::spawn(move || {
        let mut s = Tokens::lock(&dir).unwrap();
        s.put("b", token("https://b.example", "at-b")).unwrap();
    });
    let mut first = first;
    first.put("a", token("https://a.example", "at-a")).unwrap();
    drop(first);
    t.join().unwrap();
    let s = Tokens::lock(home.path()).unwrap();
    assert!(s.get("a", "https://a.example").is_some());
    assert!(s.get("b", "https://b.example").is_some());
}

#[test]
fn a_corrupt_or_oversized_file_is_an_error_code_not_a_panic() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(TOKENS_FILE);
    for (bytes, want) in [
        (b"not json".to_vec(), StoreError::Corrupt),
        (b"[]".to_vec(), StoreError::Corrupt),
        (
            br#"{"version":2,"servers":{}}"#.to_vec(),
            StoreError::Corrupt,
        ),
        (
            br#"{"version":1,"servers":{"a":{"k":{"url":1}}}}"#.to_vec(),
            StoreError::Corrupt,
        ),
        (
            vec![b' '; (TOKENS_FILE_BYTES + 1) as usize],
            StoreError::TooLarge,
        ),
    ] {
        fs::write(&path, &bytes).unwrap();
        assert_eq!(Tokens::lock(home.path()).unwrap_err(), want);
        assert_eq!(fs::read(&path).unwrap(), bytes, "left as it was");
    }
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    assert_eq!(Tokens::lock(home.path()).unwrap_err(), StoreError::Corrupt);
    fs::remove_dir(&path).unwrap();
    std::os::unix::fs::symlink(home.path().join("elsewhere"), &path).unwrap();
    assert_eq!(
        Tokens::lock(home.path()).unwrap_err(),
        StoreError::Io,
        "never followed"
    );
}

#[test]
fn debug_shows_no_secret() {
    let mut t = token("https://a.example", "at-secret-value");
    t.client_secret = Some("cs-secret-value".into());
    let d = format!("{t:?}");
    assert!(!d.contains("secret-value"), "{d}");
}
