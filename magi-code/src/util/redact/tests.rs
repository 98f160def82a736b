use super::secrets::{secret_pieces, SECRET_PIECE_BYTES};
use super::stream::TOKEN_BYTES;
use super::*;
use proptest::prelude::*;

/// Loaded values the tests know (never registered process-wide).
const KEY: &str = "Zq8vKp3LmN0x";
const KEY2: &str = "Zq8vKp3LmN0xLONGER";

fn clean(s: &str) -> String {
    with(&[KEY, KEY2], s)
}

/// `s` through a redactor knowing `keys`, whole.
fn with(keys: &[&str], s: &str) -> String {
    split(keys, &[s])
}

/// `pieces` fed one by one to a redactor knowing `keys`.
fn split(keys: &[&str], pieces: &[&str]) -> String {
    let mut r = Redactor::with_secrets(keys.iter().map(|k| (*k).to_owned()).collect());
    let mut out: String = pieces.iter().map(|p| r.feed(p)).collect();
    out.push_str(&r.finish());
    out
}

#[test]
fn names() {
    assert_eq!(safe_name("scripted").as_deref(), Some("scripted"));
    assert_eq!(
        safe_name("claude-sonnet-4-5-20250929").as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    assert!(safe_name("meta-llama/Meta-Llama-3.1-8B-Instruct-Q4_K_M").is_some());
    assert!(safe_name("Claude Sonnet 4.5").is_some());
    // Long alphanumeric runs are names, not credentials (decision 35: nothing else).
    assert!(safe_name("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg").is_some());
    assert!(safe_name("ft:gpt-4o-mini:org:custom:9f86d081884c7d659a2feaa0c55ad015").is_some());
    assert!(safe_name("task-runner").is_some());
    assert!(safe_name(&"m".repeat(256)).is_some());
    assert_eq!(safe_name(&"m".repeat(257)), None);
    assert_eq!(safe_name("sk-ant-api03-abcdef"), None);
    assert_eq!(safe_name("ghp_0123456789abcdefghij0123456789abcdef"), None);
    assert_eq!(safe_name("Bearer abc"), None);
    assert_eq!(safe_name("a\u{7}b"), None);
    assert_eq!(safe_name("a\nb"), None);
    assert_eq!(safe_name(""), None);
}

#[test]
fn ordinary_words_digests_and_ids_are_shown_as_written() {
    for s in [
        "This is risk-free: the task-runner and the desk-lamp work",
        "git reset --hard 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
        "id 3f2b8c1e9d4a4f6b8e2c7a1d5b9e0f34 and 3f2b8c1e-9d4a-4f6b-8e2c-7a1d5b9e0f34",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==",
        "ask-me-anything-about-everything-here",
        "sk-short and ghp_tooShort, AKIA1234 AIzaShort",
        "mask_0123456789abcdefghij (not a prefix at the start)",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "a --- rule\n-----\nand ----- dashes",
        "[redacted] stays [redacted]",
    ] {
        assert_eq!(clean(s), s);
    }
}

#[test]
fn credential_prefixes_redact_the_whole_token() {
    let ghp = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    assert_eq!(clean(&format!("token {ghp} here")), "token [redacted] here");
    assert_eq!(clean(&format!("(\"{ghp}\"),")), "(\"[redacted]\"),");
    assert_eq!(clean(&format!("{ghp}.")), "[redacted].");
    for p in [
        "sk-",
        "sk_",
        "rk_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "glpat-",
        "xoxa-",
        "xoxb-",
        "xoxp-",
        "xoxs-",
    ] {
        let t = format!("{p}0123456789abcdef");
        assert_eq!(clean(&t), REDACTED, "{t}");
        let short = format!("{p}0123456789abcde");
        assert_eq!(clean(&short), short, "15 after the prefix is not enough");
    }
    assert_eq!(clean("sk-ant-api03-abcdef"), REDACTED);
    // An assignment's or a header's value is a token of its own.
    assert_eq!(
        clean(&format!("GITHUB_TOKEN={ghp}")),
        "GITHUB_TOKEN=[redacted]"
    );
    assert_eq!(
        clean("export AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJ012345"),
        "export AWS_ACCESS_KEY_ID=[redacted]"
    );
    assert_eq!(
        clean("x-api-key:sk-ant-api03-abcdef;"),
        "x-api-key:[redacted];"
    );
    assert_eq!(
        clean("{\"k\":\"sk_0123456789abcdef\"}"),
        "{\"k\":\"[redacted]\"}"
    );
    assert_eq!(
        clean("a=b c:d risk-free: x=sk-short"),
        "a=b c:d risk-free: x=sk-short"
    );
    assert_eq!(clean("sk-0123456789abcdef!x"), "sk-0123456789abcdef!x");
    assert_eq!(clean("AKIAABCDEFGHIJ012345"), REDACTED);
    assert_eq!(clean("ASIAABCDEFGHIJ012345,"), "[redacted],");
    assert_eq!(clean("AKIAABCDEFGHIJ0123456"), "AKIAABCDEFGHIJ0123456");
    assert_eq!(clean("AKIAabcdefghij012345"), "AKIAabcdefghij012345");
    let aiza = format!("AIza{}", "B".repeat(35));
    assert_eq!(clean(&aiza), REDACTED);
    assert_eq!(clean(&format!("{aiza}B")), format!("{aiza}B"));
}

#[test]
fn authorization_schemes_jwts_and_pem_blocks() {
    assert_eq!(
        clean("curl -H \"Authorization: Bearer abc123\" x"),
        "curl -H \"Authorization: Bearer [redacted]\" x"
    );
    assert_eq!(clean("basic dXNlcjpwYXNz== ok"), "basic [redacted] ok");
    assert_eq!(clean("BEARER\n\tzzz"), "BEARER\n\t[redacted]");
    assert_eq!(clean("Bearer : zzz y"), "Bearer : [redacted] y");
    assert_eq!(clean("Bearer"), "Bearer");
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
    assert_eq!(clean(&format!("t={jwt}&x=1")), "t=[redacted]&x=1");
    assert_eq!(clean(&format!("{jwt}.")), "[redacted].");
    assert_eq!(clean("eyJa.eyJb"), "eyJa.eyJb");
    assert_eq!(clean("eyJa.b.c.d"), "eyJa.b.c.d");
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAKC\n-----END RSA PRIVATE KEY-----";
    assert_eq!(
        clean(&format!("key:\n{pem}\nafter")),
        "key:\n[redacted]\nafter"
    );
    assert_eq!(
        clean("x -----BEGIN PRIVATE KEY-----\nA\n-----END RSA PRIVATE KEY-----\nB"),
        "x [redacted]",
        "an unterminated block is redacted to the end"
    );
    // The label bound at its edge: 64 bytes is a header, 65 is not.
    for (n, redacted) in [(64, true), (65, false)] {
        let label = format!("{} PRIVATE KEY", "A".repeat(n - 12));
        let block = format!("-----BEGIN {label}-----\nQUJD\n-----END {label}-----");
        let want = if redacted { REDACTED } else { block.as_str() };
        assert_eq!(clean(&block), want, "{n}");
    }
    assert_eq!(
        clean("------BEGIN OPENSSH PRIVATE KEY-----\nb\n-----END OPENSSH PRIVATE KEY----- c"),
        "-[redacted] c"
    );
}

#[test]
fn loaded_values_are_redacted_anywhere_longest_first() {
    assert_eq!(clean(&format!("k={KEY};")), "k=[redacted];");
    assert_eq!(clean(&format!("x{KEY2}y")), "x[redacted]y");
    assert_eq!(clean("Zq8vKp3LmN0"), "Zq8vKp3LmN0");
    // The bound at its edge: 8 bytes is a loaded value, 7 is not.
    assert_eq!(with(&["abcdefgh"], "xabcdefghx"), "x[redacted]x");
    assert_eq!(with(&["abcdefg"], "xabcdefgx"), "xabcdefgx");
    assert_eq!(secret_pieces("abcdefg abcdefgh"), ["abcdefgh"]);
    assert_eq!(
        secret_pieces("abc defghijkl"),
        ["defghijkl"],
        "pieces without white space"
    );
    let long = "k".repeat(SECRET_PIECE_BYTES + 3);
    assert_eq!(secret_pieces(&long), std::slice::from_ref(&long));
    let longer = "k".repeat(SECRET_PIECE_BYTES + SECRET_MIN_BYTES);
    assert_eq!(secret_pieces(&longer).len(), 2);
    let r = with(
        &secret_pieces(&longer)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &longer,
    );
    assert_eq!(r, "[redacted][redacted]");
}

#[test]
fn registered_values_are_redacted_process_wide() {
    register_secret("  uniq-Reg1stered-v4lue  tiny ");
    assert_eq!(
        sanitize_text("x uniq-Reg1stered-v4lue y tiny"),
        "x [redacted] y tiny"
    );
    assert!(is_secret_like("uniq-Reg1stered-v4lue"));
    assert_eq!(safe_name("model-uniq-Reg1stered-v4lue"), None);
}

#[test]
fn control_characters_are_dropped_and_join_what_they_split() {
    assert_eq!(clean("a\u{1b}[31mb\tc\r\n"), "a[31mb\tc\n");
    // A split credential is still one token once the control character is gone.
    assert_eq!(clean("sk-01234567\r89abcdef01"), REDACTED);
}

#[test]
fn a_key_split_over_seven_byte_deltas_never_leaks() {
    let text = format!("use ghp_0123456789abcdefghijABCDEFGHIJ012345 and {KEY} now");
    let pieces: Vec<String> = text
        .as_bytes()
        .chunks(7)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let mut r = Redactor::with_secrets(vec![KEY.to_owned()]);
    let mut shown = String::new();
    for p in &pieces {
        shown.push_str(&r.feed(p));
        assert!(!shown.contains("ghp_"), "{shown}");
        assert!(!shown.contains("Zq8v"), "{shown}");
    }
    shown.push_str(&r.finish());
    assert_eq!(shown, "use [redacted] and [redacted] now");
}

#[test]
fn only_what_may_still_become_a_secret_is_held() {
    let mut r = Redactor::with_secrets(vec![KEY.to_owned()]);
    assert_eq!(
        r.feed("thinking..."),
        "thinking...",
        "an ordinary word streams at once"
    );
    assert_eq!(r.feed(" risk-free sketch"), " risk-free sketch");
    assert_eq!(r.feed(" sk"), " ", "may become sk-…");
    assert_eq!(r.feed("ip"), "skip");
    assert_eq!(r.feed(" ghp_0123"), " ");
    assert_eq!(r.feed("456789abcdef Bearer"), "[redacted] Bearer");
    assert_eq!(
        r.feed(" abc"),
        " ",
        "the token after Bearer waits for its end"
    );
    assert_eq!(r.feed(" eyJ"), "[redacted] ", "a possible JWT run waits");
    assert_eq!(r.feed("x,"), "eyJx,");
    assert_eq!(r.feed(" Zq8v"), " ", "the start of a loaded value waits");
    assert_eq!(r.feed("x -"), "Zq8vx ");
    assert_eq!(r.finish(), "-");
}

#[test]
fn the_hold_is_bounded_at_the_token_bound() {
    // A run without white space of exactly the bound is judged whole; one byte more is
    // not a credential token, and the stream stops holding it.
    let at = format!("sk-{}", "a".repeat(TOKEN_BYTES - 3));
    assert_eq!(clean(&at), REDACTED);
    let over = format!("sk-{}", "a".repeat(TOKEN_BYTES - 2));
    assert_eq!(clean(&over), over);
    let mut r = Redactor::with_secrets(Vec::new());
    let shown = r.feed(&over);
    assert!(r.held() <= HELD_BYTES);
    assert_eq!(shown.len() + r.held(), over.len());
    // After Bearer a long token is swallowed whole.
    assert_eq!(clean(&format!("Bearer {over} x")), "Bearer [redacted] x");
    // A JWT inside a long run is still found.
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
    let long = format!("{}:{jwt}:{}", "a".repeat(TOKEN_BYTES), "b".repeat(9));
    assert_eq!(
        clean(&long),
        format!("{}:[redacted]:{}", "a".repeat(TOKEN_BYTES), "b".repeat(9))
    );
    // A long PEM body holds nothing.
    let mut r = Redactor::with_secrets(Vec::new());
    let _ = r.feed("-----BEGIN PRIVATE KEY-----\n");
    let _ = r.feed(&"QUJD\n".repeat(100_000));
    assert!(r.held() < 100, "{}", r.held());
}

#[test]
fn long_hostile_texts_redact_in_linear_time() {
    // Each would cost a quadratic rescan per character if the stages rescanned what they
    // hold: held credential-like tokens, dot runs, JWT-like runs, PEM-like dashes.
    for unit in [
        format!("sk-{} ", "a".repeat(TOKEN_BYTES - 4)),
        format!("{} ", ".".repeat(TOKEN_BYTES)),
        format!("eyJ{} ", "a".repeat(TOKEN_BYTES - 3)),
        "-----BEGIN ".repeat(100),
        format!("{KEY}{}", "Zq8vKp3LmN0"),
    ] {
        let text = unit.repeat((1 << 20) / unit.len());
        let mut r = Redactor::with_secrets(vec![KEY.to_owned(), KEY2.to_owned()]);
        let mut n = 0;
        for piece in text.as_bytes().chunks(4096) {
            n += r.feed(std::str::from_utf8(piece).unwrap()).len();
            assert!(r.held() <= HELD_BYTES);
        }
        n += r.finish().len();
        assert!(n > 0);
    }
}

/// Fragments that make secrets, near-secrets and their edges likely.
fn fragment() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "sk-",
        "ghp_",
        "AKIA",
        "AIza",
        "eyJ",
        "eyJa",
        ".",
        "..",
        "Bearer",
        "basic",
        " ",
        "\n",
        "\t",
        "\r",
        "\u{1}",
        "-----BEGIN ",
        "RSA ",
        "PRIVATE KEY",
        "-----",
        "-----END ",
        "-",
        "[redacted]",
        "[",
        "]",
        "\"",
        ",",
        "(",
        ")",
        ":",
        "=",
        "a",
        "Z",
        "0",
        "9",
        "_",
        "é",
        "0123456789abcdef",
        "ABCDEFGHIJ012345",
        KEY,
        KEY2,
        "Zq8v",
        "xyz",
        "\u{a0}",
    ])
    .prop_map(str::to_owned)
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..40).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn any_split_gives_the_whole_texts_redaction(
        s in text(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut at: Vec<usize> = cuts
            .iter()
            .map(|c| c % (s.len() + 1))
            .filter(|c| s.is_char_boundary(*c))
            .collect();
        at.sort_unstable();
        let mut pieces = Vec::new();
        let mut last = 0;
        for c in at {
            pieces.push(&s[last..c]);
            last = c;
        }
        pieces.push(&s[last..]);
        prop_assert_eq!(split(&[KEY, KEY2], &pieces), clean(&s));
    }

    #[test]
    fn the_fast_path_never_skips_a_change(s in prop_oneof![text(), any::<String>()]) {
        if plain(&s) {
            prop_assert_eq!(redact_whole(&s), s);
        }
    }

    #[test]
    fn redaction_is_idempotent(s in text()) {
        let once = clean(&s);
        prop_assert_eq!(clean(&once), once.clone());
        prop_assert!(!once.contains(KEY));
    }

    #[test]
    fn seven_byte_deltas_never_show_a_raw_credential(
        pre in text(),
        post in text(),
        tail in "[A-Za-z0-9_-]{16,40}",
    ) {
        let secret = format!("ghp_{tail}");
        let s = format!("{pre} {secret} {post}");
        let mut r = Redactor::with_secrets(vec![KEY.to_owned()]);
        let mut shown = String::new();
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let mut j = (i + 7).min(bytes.len());
            while !s.is_char_boundary(j) {
                j += 1;
            }
            shown.push_str(&r.feed(&s[i..j]));
            i = j;
        }
        shown.push_str(&r.finish());
        prop_assert!(!shown.contains(&secret));
        prop_assert_eq!(shown, with(&[KEY], &s));
    }
}

#[test]
fn tool_outputs_lose_loaded_values_only() {
    // Registered process-wide (the one test that must): no other test's text holds it.
    register_secret("Tq4Lw8Zx2Vb6Nm0Rk");
    register_secret("Tq4Lw8Zx2Vb6Nm0RkLONGER");
    let out = redact_loaded("a Tq4Lw8Zx2Vb6Nm0Rk b Tq4Lw8Zx2Vb6Nm0RkLONGER".to_owned());
    assert_eq!(out, "a [redacted] b [redacted]");
    // A credential-shaped word the backend never loaded is the model's material.
    let shaped = "sk-ant-abcdefghijklmnopqrstuvwx and Bearer abc.def";
    assert_eq!(redact_loaded(shaped.to_owned()), shaped);
}
