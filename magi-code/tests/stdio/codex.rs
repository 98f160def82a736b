//! The `codex` provider (`backend.md` "Providers", `decisions.md` 43–44) through the binary:
//! loopback fakes for the token endpoint and the Responses endpoint, JWTs built here, an
//! `auth.json` in a temporary `CODEX_HOME`.

use crate::common::fake_llm::{FakeLlm, Hold, Reply, Seen};
use crate::common::responses_sse::{completed, ev, text};
use crate::common::{
    assert_error, assert_failed_status, diagnostic_codes, events, init_params, result, run_turn,
    start, start_session, Env, Server,
};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const WAIT: Duration = crate::common::STEP;

/// Seconds since the epoch now.
fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An unsigned access token expiring `in_secs` from now, told apart by `tag`.
fn jwt(in_secs: i64, tag: &str) -> String {
    let claims = json!({"exp": now_secs() + in_secs, "sub": tag});
    format!(
        "{}.{}.sig-{tag}",
        magi_code::util::b64::encode(br#"{"alg":"none","typ":"JWT"}"#),
        magi_code::util::b64::encode(claims.to_string().as_bytes())
    )
}

/// An `Env` whose `CODEX_HOME` holds `auth` (mode 0600, if given) and whose settings select
/// `codex/gpt-5-codex` at `llm` (under `/backend-api/codex`) and the token endpoint `auth_url`.
fn codex_env(llm: &FakeLlm, auth_url: &str, auth: Option<&Value>) -> (Env, PathBuf) {
    let mut env = Env::new();
    let home = env.root.join("codex-home");
    std::fs::create_dir(&home).unwrap();
    env.set_var("CODEX_HOME", home.to_str().unwrap());
    let path = home.join("auth.json");
    if let Some(a) = auth {
        std::fs::write(&path, a.to_string()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    env.write_global_settings(&json!({
        "provider": "codex", "model": "gpt-5-codex",
        "providers": {"codex": {"base_url": format!("{}/backend-api/codex", llm.base),
            "auth_url": auth_url}},
    }));
    (env, path)
}

/// A Codex CLI `auth.json` with these tokens and members of its own the backend must keep.
fn auth_json(access: &str, refresh: &str) -> Value {
    json!({"OPENAI_API_KEY": null, "auth_mode": "chatgpt", "tokens": {
        "id_token": "id-token-old", "access_token": access, "refresh_token": refresh,
        "account_id": "acc-123"}, "last_refresh": "2025-01-01T00:00:00Z"})
}

/// The token endpoint's answer with fresh tokens tagged `tag`.
fn granted(tag: &str) -> (Reply, String) {
    let access = jwt(3_600, tag);
    let body = json!({"id_token": format!("id-{tag}"), "access_token": access,
        "refresh_token": format!("rt-{tag}"), "expires_in": 3600});
    (Reply::status(200, &body), access)
}

/// The value of header `name` of `seen`.
fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Asserts no value of `secrets` is in `frames`, in any history file, or on stderr (after a
/// clean shutdown of `s`).
fn assert_secret(env: &Env, s: &mut Server, frames: &[Value], secrets: &[&str]) {
    s.shutdown_ok("bye");
    let stderr = String::from_utf8_lossy(&s.stderr()).into_owned();
    let mut texts = vec![stderr];
    texts.extend(frames.iter().map(Value::to_string));
    let mut dirs = vec![env.home()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                dirs.push(e.path());
            } else if let Ok(t) = std::fs::read_to_string(e.path()) {
                texts.push(t);
            }
        }
    }
    for secret in secrets {
        assert!(
            !texts.iter().any(|t| t.contains(secret)),
            "a token escaped: {secret}"
        );
    }
}

/// The last `diagnostic`'s `(code, summary)`.
fn diagnostic(frames: &[Value]) -> (String, String) {
    let d = &events(frames, "diagnostic").last().expect("a diagnostic")["data"];
    (
        d["code"].as_str().unwrap().to_owned(),
        d["summary"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_step_carries_the_codex_headers_and_the_session_as_cache_key() {
    let llm = FakeLlm::start(vec![text("hi there")]);
    let tokens = FakeLlm::start(vec![]);
    let access = jwt(3_600, "valid");
    let auth = auth_json(&access, "rt-valid");
    let (env, _) = codex_env(&llm, &tokens.base, Some(&auth));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let seen = llm.next(WAIT);
    assert_eq!(seen.path, "/backend-api/codex/responses");
    let bearer = format!("Bearer {access}");
    assert_eq!(header(&seen, "authorization"), Some(bearer.as_str()));
    assert_eq!(header(&seen, "chatgpt-account-id"), Some("acc-123"));
    assert_eq!(header(&seen, "originator"), Some("magi-code"));
    assert_eq!(header(&seen, "session_id"), Some(sid.as_str()));
    assert_eq!(seen.body["store"], false);
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["prompt_cache_key"], json!(sid));
    assert!(tokens.drain().is_empty(), "a fresh token is not refreshed");
    assert_secret(
        &env,
        &mut s,
        &frames,
        &[&access, "rt-valid", "id-token-old"],
    );
}

#[test]
fn a_token_expiring_within_60_s_is_refreshed_before_the_step_and_written_back() {
    let llm = FakeLlm::start(vec![text("hi")]);
    let (reply, new_access) = granted("new");
    let tokens = FakeLlm::start(vec![reply]);
    let old = jwt(30, "old");
    let (env, path) = codex_env(&llm, &tokens.base, Some(&auth_json(&old, "rt-old")));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let grant = tokens.next(WAIT);
    assert_eq!(grant.path, "/oauth/token");
    assert_eq!(
        grant.body,
        json!({"client_id": "app_EMoamEEZ73f0CkXaXp7hrann", "grant_type": "refresh_token",
            "refresh_token": "rt-old", "scope": "openid profile email"})
    );
    let seen = llm.next(WAIT);
    let bearer = format!("Bearer {new_access}");
    assert_eq!(header(&seen, "authorization"), Some(bearer.as_str()));
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        v["tokens"],
        json!({"id_token": "id-new", "access_token": new_access, "refresh_token": "rt-new",
            "account_id": "acc-123"})
    );
    assert_eq!(
        (&v["OPENAI_API_KEY"], &v["auth_mode"]),
        (&Value::Null, &json!("chatgpt"))
    );
    let last = v["last_refresh"].as_str().unwrap();
    assert!(
        last.ends_with('Z') && last.contains('.') && last > "2026",
        "{last}"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the mode is kept");
    assert!(
        path.with_file_name("auth.json.lock").exists(),
        "the lock file stays"
    );
    assert!(tokens.drain().is_empty(), "one grant");
    let secrets = [old.as_str(), &new_access, "rt-old", "rt-new", "id-new"];
    assert_secret(&env, &mut s, &frames, &secrets);
}

#[test]
fn a_401_refreshes_once_and_sends_the_step_again() {
    let unauthorized = Reply::status(401, &json!({"error": {"message": "expired"}}));
    let llm = FakeLlm::start(vec![unauthorized, text("hi")]);
    let (reply, new_access) = granted("after401");
    let tokens = FakeLlm::start(vec![reply]);
    let old = jwt(3_600, "revoked");
    let (env, _) = codex_env(&llm, &tokens.base, Some(&auth_json(&old, "rt-1")));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    let first = llm.next(WAIT);
    assert_eq!(
        header(&first, "authorization"),
        Some(format!("Bearer {old}").as_str())
    );
    let again = llm.next(WAIT);
    let bearer = format!("Bearer {new_access}");
    assert_eq!(header(&again, "authorization"), Some(bearer.as_str()));
    assert_eq!(again.body, first.body, "the same step");
    assert_eq!(tokens.next(WAIT).body["refresh_token"], "rt-1");
    assert!(tokens.drain().is_empty() && llm.drain().is_empty());
    assert_secret(
        &env,
        &mut s,
        &frames,
        &[&old, &new_access, "rt-1", "rt-after401"],
    );
}

#[test]
fn a_second_401_fails_the_step_with_provider_auth_and_the_codex_login_summary() {
    let unauthorized = Reply::status(401, &json!({"error": {"message": "no"}}));
    let llm = FakeLlm::start(vec![unauthorized.clone(), unauthorized]);
    let (reply, _) = granted("useless");
    let tokens = FakeLlm::start(vec![reply]);
    let old = jwt(3_600, "refused");
    let (env, _) = codex_env(&llm, &tokens.base, Some(&auth_json(&old, "rt-2")));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(
        (&fin["outcome"], &fin["error_code"]),
        (&json!("failed"), &json!("execution_failed"))
    );
    assert_eq!(diagnostic_codes(&frames), ["provider_auth"]);
    assert!(diagnostic(&frames).1.contains("codex login"), "{frames:#?}");
    let _ = (llm.next(WAIT), llm.next(WAIT));
    assert!(llm.drain().is_empty(), "sent again once, not twice");
    let _ = tokens.next(WAIT);
    assert!(tokens.drain().is_empty(), "one refresh");
    assert_secret(&env, &mut s, &frames, &[&old, "rt-2"]);
}

#[test]
fn a_refused_refresh_fails_the_step_with_provider_auth_and_sends_no_step() {
    for refusal in [
        Reply::status(
            400,
            &json!({"error": {"code": "refresh_token_reused", "message": "x"}}),
        ),
        Reply::status(401, &json!({"error": "invalid_grant"})),
    ] {
        let llm = FakeLlm::start(vec![text("never")]);
        let tokens = FakeLlm::start(vec![refusal]);
        let old = jwt(-5, "spent");
        let (env, path) = codex_env(&llm, &tokens.base, Some(&auth_json(&old, "rt-spent")));
        let before = std::fs::read(&path).unwrap();
        let (mut s, sid) = start_session(&env, &[]);
        let frames = run_turn(&mut s, &sid, "hello");
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "failed");
        let (code, summary) = diagnostic(&frames);
        assert_eq!(code, "provider_auth");
        assert!(summary.contains("codex login"), "{summary}");
        assert!(llm.drain().is_empty(), "no step went out");
        assert_eq!(std::fs::read(&path).unwrap(), before, "auth.json untouched");
        assert_secret(&env, &mut s, &frames, &[&old, "rt-spent"]);
    }
}

#[test]
fn readiness_at_initialize_reads_auth_json_locally() {
    let llm = FakeLlm::start(vec![]);
    let tokens = FakeLlm::start(vec![]);
    let expired = jwt(-10, "expired");
    let cases = [
        (None, false),
        (
            Some(json!({"OPENAI_API_KEY": "sk-only", "tokens": null})),
            false,
        ),
        (Some(auth_json(&expired, "")), false),
        (Some(auth_json(&jwt(60, "edge"), "")), false),
        (Some(auth_json(&expired, "rt-present")), true),
        (Some(auth_json(&jwt(3_600, "valid"), "")), true),
    ];
    for (auth, ready) in cases {
        let (env, _) = codex_env(&llm, &tokens.base, auth.as_ref());
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(&["status", "shutdown"]));
        if ready {
            assert_eq!(result(&f)["status"]["provider"], "codex", "{auth:?}");
        } else {
            assert_error(&f, Some("init"), "provider_unavailable");
            let st = s.call("st", "status", &json!({}));
            assert_failed_status(result(&st), "provider_unavailable");
        }
        s.shutdown_ok("bye");
    }
    assert!(
        llm.drain().is_empty() && tokens.drain().is_empty(),
        "no request"
    );
}

#[test]
fn model_refresh_reads_get_models_with_the_turn_headers_but_session_id() {
    let models = json!({"models": [
        {"slug": "gpt-5-codex", "display_name": "GPT-5 Codex",
            "supported_reasoning_levels": [{"effort": "low"}, {"effort": "high"}]},
        {"slug": "bare"}]});
    let llm = FakeLlm::start(vec![Reply::status(200, &models)]);
    let tokens = FakeLlm::start(vec![]);
    let access = jwt(3_600, "list");
    let (env, _) = codex_env(&llm, &tokens.base, Some(&auth_json(&access, "rt-l")));
    let mut s = start(&env, &["model.refresh"]);
    let r = s.call("r", "model.refresh", &json!({"provider": "codex"}));
    assert_eq!(result(&r)["models"], 2, "{r}");
    let seen = llm.next(WAIT);
    assert_eq!(seen.path, "/backend-api/codex/models");
    let bearer = format!("Bearer {access}");
    assert_eq!(header(&seen, "authorization"), Some(bearer.as_str()));
    assert_eq!(header(&seen, "chatgpt-account-id"), Some("acc-123"));
    assert_eq!(header(&seen, "originator"), Some("magi-code"));
    assert_eq!(header(&seen, "session_id"), None);
    let cache = std::fs::read(env.home().join("cache/models/codex.json")).unwrap();
    let cache: Value = serde_json::from_slice(&cache).unwrap();
    assert_eq!(
        cache["models"],
        json!([{"id": "gpt-5-codex", "name": "GPT-5 Codex", "efforts": ["low", "high"]},
            {"id": "bare", "name": null}])
    );
    assert_secret(&env, &mut s, &[r], &[&access, "rt-l"]);
}

#[test]
fn two_children_refreshing_at_once_send_one_grant_and_both_work() {
    let llm = FakeLlm::start(vec![text("one"), text("two")]);
    let (mut reply, new_access) = granted("shared");
    // A held answer keeps the first refresh open while the other child wants one too.
    let hold = Hold::default();
    reply.hold = Some(hold.clone());
    let tokens = FakeLlm::start(vec![reply]);
    let old = jwt(20, "both");
    let (env, path) = codex_env(&llm, &tokens.base, Some(&auth_json(&old, "rt-once")));
    let (mut a, sa) = start_session(&env, &[]);
    let (mut b, sb) = start_session(&env, &[]);
    let ra = crate::common::start_turn(&mut a, &sa, "from a");
    let rb = crate::common::start_turn(&mut b, &sb, "from b");
    assert!(!ra.is_empty() && !rb.is_empty());
    // One grant request is open (the other child waits for its lock): answer it now.
    assert_eq!(tokens.next(WAIT).body["refresh_token"], "rt-once");
    hold.release();
    for s in [&mut a, &mut b] {
        let frames = crate::common::until_finished(s);
        assert_eq!(
            frames.last().unwrap()["data"]["outcome"],
            "completed",
            "{frames:#?}"
        );
    }
    assert!(tokens.drain().is_empty(), "exactly one refresh grant");
    let bearer = format!("Bearer {new_access}");
    for _ in 0..2 {
        assert_eq!(
            header(&llm.next(WAIT), "authorization"),
            Some(bearer.as_str())
        );
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["tokens"]["refresh_token"], "rt-shared");
    assert_secret(
        &env,
        &mut a,
        &[],
        &[&old, &new_access, "rt-once", "rt-shared"],
    );
    assert_secret(&env, &mut b, &[], &[&old, &new_access]);
}

#[test]
fn a_refresh_once_sent_is_finished_and_stored_when_the_turn_is_cancelled() {
    let llm = FakeLlm::start(vec![text("after")]);
    let (mut reply, new_access) = granted("late");
    // The answer is held until the cancel is over.
    let hold = Hold::default();
    reply.hold = Some(hold.clone());
    let tokens = FakeLlm::start(vec![reply]);
    let old = jwt(10, "cancelled");
    let (env, path) = codex_env(&llm, &tokens.base, Some(&auth_json(&old, "rt-sent")));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = crate::common::start_turn(&mut s, &sid, "hello");
    assert_eq!(tokens.next(WAIT).body["refresh_token"], "rt-sent");
    let (frames, took) = crate::common::cancel_turn(&mut s, &sid, &run_id);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(
        took < Duration::from_millis(1_000),
        "cancel waited for the refresh: {took:?}"
    );
    hold.release();
    // The next turn uses what the cancelled run's refresh stored: no second grant.
    let frames = run_turn(&mut s, &sid, "again");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let bearer = format!("Bearer {new_access}");
    assert_eq!(
        header(&llm.next(WAIT), "authorization"),
        Some(bearer.as_str())
    );
    assert!(tokens.drain().is_empty(), "one grant");
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["tokens"]["refresh_token"], "rt-late");
    assert_secret(
        &env,
        &mut s,
        &frames,
        &[&old, &new_access, "rt-sent", "rt-late"],
    );
}

#[test]
fn a_tool_that_prints_auth_json_shows_the_tokens_redacted() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
        "arguments": json!({"command": "cat \"$CODEX_HOME/auth.json\""}).to_string()});
    let done = json!({"type": "response.output_item.done", "sequence_number": 0,
        "output_index": 0, "item": call});
    let llm = FakeLlm::start(vec![Reply::sse(vec![ev(&done), completed(1)]), text("ok")]);
    let tokens = FakeLlm::start(vec![]);
    let access = jwt(3_600, "printed");
    let (env, _) = codex_env(&llm, &tokens.base, Some(&auth_json(&access, "rt-printed")));
    let mut settings: Value =
        serde_json::from_slice(&std::fs::read(env.home().join("settings.json")).unwrap()).unwrap();
    settings["tools"] = json!({"shell": "allow"});
    env.write_global_settings(&settings);
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "show me");
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    let _ = llm.next(WAIT);
    let second = llm.next(WAIT).body.to_string();
    assert!(
        second.contains("acc-123") && second.contains("[redacted]"),
        "{second}"
    );
    assert!(
        !second.contains(&access) && !second.contains("rt-printed"),
        "{second}"
    );
    assert_secret(
        &env,
        &mut s,
        &frames,
        &[&access, "rt-printed", "id-token-old"],
    );
}

#[test]
fn a_refresh_killed_before_its_rename_is_recovered_at_the_next_start() {
    // What a kill -9 between the answer's temp file and its rename leaves: `auth.json` with
    // the spent tokens and, beside it, a complete newer one of ours with the answer.
    let llm = FakeLlm::start(vec![text("hi")]);
    let refused = Reply::status(400, &json!({"error": {"code": "refresh_token_reused"}}));
    let tokens = FakeLlm::start(vec![refused]);
    let spent = jwt(30, "spent");
    let (env, path) = codex_env(&llm, &tokens.base, Some(&auth_json(&spent, "rt-spent")));
    let saved = jwt(3_600, "saved");
    let leftover = path.with_file_name(format!(".auth.json.magi-{}.tmp", "7".repeat(32)));
    std::fs::write(&leftover, auth_json(&saved, "rt-saved").to_string()).unwrap();
    let old = SystemTime::now() - Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let bearer = format!("Bearer {saved}");
    assert_eq!(
        header(&llm.next(WAIT), "authorization"),
        Some(bearer.as_str())
    );
    assert!(
        tokens.drain().is_empty(),
        "the spent refresh token is never sent"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["tokens"]["refresh_token"], "rt-saved");
    assert!(!leftover.exists());
    s.shutdown_ok("bye");
}

#[test]
fn a_kill_at_any_moment_of_a_rotation_never_loses_the_token() {
    use crate::common::rotating::{Rotating, Writes};
    let trials = 16u64;
    let llm = FakeLlm::start((0..=trials).map(|_| text("hi")).collect());
    // Access tokens that are not JWTs have no readable expiry: every step refreshes first.
    let endpoint = Rotating::start("rt-first-Pw3Ne", |n, refresh| {
        json!({"access_token": format!("at-{n}-Yc6Ub"), "refresh_token": refresh,
            "id_token": format!("id-{n}"), "expires_in": 3600})
    });
    let auth_url = endpoint.url.trim_end_matches("/token").to_owned();
    let spent = jwt(30, "first");
    let (env, path) = codex_env(&llm, &auth_url, Some(&auth_json(&spent, "rt-first-Pw3Ne")));
    let home = path.parent().unwrap().to_path_buf();
    for trial in 0..trials {
        let writes = Writes::watch(&home);
        let (mut s, sid) = start_session(&env, &[]);
        crate::common::start_turn(&mut s, &sid, "hello");
        assert!(
            writes.until(".auth.json.magi-"),
            "trial {trial}: no refresh written ({} refused)",
            endpoint.refused.lock().unwrap()
        );
        for _ in 0..(trial % 4) * 50 {
            std::thread::yield_now();
        }
        s.crash();
        assert_eq!(
            *endpoint.refused.lock().unwrap(),
            0,
            "trial {trial}: a rotation was lost"
        );
    }
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(*endpoint.refused.lock().unwrap(), 0);
    assert!(endpoint.issued.lock().unwrap().0 > trials);
    s.shutdown_ok("bye");
}
