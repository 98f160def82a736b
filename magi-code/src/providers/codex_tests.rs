use super::*;

/// An unsigned JWT whose payload is `claims`.
fn jwt(claims: &Value) -> String {
    format!(
        "{}.{}.sig",
        crate::util::b64::encode(br#"{"alg":"none"}"#),
        crate::util::b64::encode(claims.to_string().as_bytes())
    )
}

fn tokens(exp_secs: i64, refresh: Option<&str>) -> Tokens {
    Tokens {
        access_token: jwt(&json!({"exp": exp_secs})),
        refresh_token: refresh.map(str::to_owned),
        account_id: None,
    }
}

#[test]
fn the_exp_claim_of_a_jwt() {
    assert_eq!(
        jwt_exp_ms(&jwt(&json!({"exp": 1_700_000_000, "sub": "u"}))),
        Some(1_700_000_000_000)
    );
    assert_eq!(jwt_exp_ms(&jwt(&json!({"exp": 12.9}))), Some(12_000));
    assert_eq!(jwt_exp_ms(&jwt(&json!({"sub": "u"}))), None);
    assert_eq!(jwt_exp_ms(&jwt(&json!({"exp": "soon"}))), None);
    assert_eq!(jwt_exp_ms("not-a-jwt"), None);
    assert_eq!(jwt_exp_ms("a.!!!.c"), None);
}

#[test]
fn readiness_at_exactly_sixty_seconds_on_a_fixed_clock() {
    let now = 1_800_000_000_000;
    let exp = 1_800_000_060; // exactly 60 s from now
    assert!(needs_refresh(&tokens(exp, None), now));
    assert!(
        !ready(&tokens(exp, None), now),
        "60 s is not more than 60 s"
    );
    assert!(ready(&tokens(exp + 1, None), now));
    assert!(!needs_refresh(&tokens(exp + 1, None), now));
    assert!(ready(&tokens(exp - 3_600, Some("rt")), now), "refreshable");
    let unreadable = Tokens {
        access_token: "opaque".into(),
        refresh_token: None,
        account_id: None,
    };
    assert!(!ready(&unreadable, now));
}

#[test]
fn parse_needs_tokens_and_a_non_empty_refresh_token_counts() {
    let at = jwt(&json!({"exp": 1}));
    let t = parse(
        json!({"tokens": {"access_token": at, "refresh_token": "rt", "account_id": "acc"}})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(t.refresh_token.as_deref(), Some("rt"));
    assert_eq!(t.account_id.as_deref(), Some("acc"));
    let empty_rt = json!({"tokens": {"access_token": at, "refresh_token": ""}});
    assert_eq!(
        parse(empty_rt.to_string().as_bytes())
            .unwrap()
            .refresh_token,
        None
    );
    // An API-key login only.
    let key_only = json!({"OPENAI_API_KEY": "sk-x", "tokens": null});
    assert_eq!(parse(key_only.to_string().as_bytes()), None);
    assert_eq!(parse(b"not json"), None);
    assert!(!format!("{t:?}").contains(&at), "Debug shows no token");
}

#[test]
fn refused_answers_by_status_and_error_code() {
    assert_eq!(answer(401, b"{}"), Err(RefreshError::Refused));
    for body in [
        json!({"error": {"code": "refresh_token_expired", "message": "x"}}),
        json!({"error": "refresh_token_reused"}),
        json!({"code": "refresh_token_invalidated"}),
    ] {
        assert_eq!(
            answer(400, body.to_string().as_bytes()),
            Err(RefreshError::Refused),
            "{body}"
        );
    }
    assert_eq!(
        answer(
            400,
            json!({"error": "invalid_request"}).to_string().as_bytes()
        ),
        Err(RefreshError::Status(400))
    );
    assert_eq!(answer(503, b""), Err(RefreshError::Status(503)));
    assert_eq!(
        answer(200, b"{}"),
        Err(RefreshError::Status(200)),
        "no token"
    );
    let ok = answer(
        200,
        json!({"access_token": "a2", "refresh_token": "r2", "expires_in": 3600})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(ok.get("access_token"), Some(&json!("a2")));
    assert!(!ok.contains_key("id_token") && !ok.contains_key("expires_in"));
}

#[test]
fn last_refresh_is_rfc3339_utc_with_fractional_seconds() {
    let at = UNIX_EPOCH + Duration::from_millis(1_764_590_400_000);
    assert_eq!(last_refresh(at), "2025-12-01T12:00:00.000000Z");
    let at = at + Duration::from_micros(123_456);
    assert_eq!(last_refresh(at), "2025-12-01T12:00:00.123456Z");
}

#[test]
fn the_grant_body() {
    assert_eq!(
        grant("rt-1"),
        json!({"client_id": "app_EMoamEEZ73f0CkXaXp7hrann", "grant_type": "refresh_token",
            "refresh_token": "rt-1", "scope": "openid profile email"})
    );
}

#[test]
fn write_back_keeps_other_members_and_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auth.json");
    let original = json!({"OPENAI_API_KEY": null, "auth_mode": "chatgpt",
        "tokens": {"id_token": "i1", "access_token": "a1", "refresh_token": "r1",
            "account_id": "acc", "extra": 7},
        "last_refresh": "2025-01-01T00:00:00Z"});
    put(&path, original.to_string().as_bytes(), 0o640);
    let mut answered = Map::new();
    answered.insert("access_token".into(), json!("a2"));
    answered.insert("refresh_token".into(), json!("r2"));
    let now = UNIX_EPOCH + Duration::from_secs(1_764_590_400);
    let bytes = written(&original.to_string().into_bytes(), &answered, now).unwrap();
    write_back(&path, &bytes, 0o640).unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        v,
        json!({"OPENAI_API_KEY": null, "auth_mode": "chatgpt",
            "tokens": {"id_token": "i1", "access_token": "a2", "refresh_token": "r2",
                "account_id": "acc", "extra": 7},
            "last_refresh": "2025-12-01T12:00:00.000000Z"})
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temp file left");
}

#[test]
fn a_fifo_or_an_oversized_file_is_no_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("auth.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo failed");
    assert_eq!(load(&fifo), None, "read without blocking");
    let big = dir.path().join("big.json");
    let at = jwt(&json!({"exp": 4_000_000_000_i64}));
    let mut body = json!({"tokens": {"access_token": at}, "pad": ""});
    body["pad"] = json!("x".repeat(64 << 10));
    put(&big, body.to_string().as_bytes(), 0o600);
    assert_eq!(load(&big), None, "over 64 KiB");
    body["pad"] = json!("");
    put(&big, body.to_string().as_bytes(), 0o600);
    assert!(load(&big).is_some());
}
