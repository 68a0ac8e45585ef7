use super::*;

const TOKEN: &str = "csg_x4Qm0b9Zr1Tt7yKc2Vd5Ue8Wf3Xg6Yh0Zi4Aj9Bk1Cl";
const OPENAI: &str = "sk-proj-Ab3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW";

fn none_left(out: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!out.contains(s), "`{s}` survived in {out}");
    }
}

#[test]
fn every_shape_compiles() {
    assert_eq!(SHAPES.len(), 6);
}

#[test]
fn shapes_are_redacted_inside_longer_texts_in_text_json_and_html() {
    let cases: Vec<(String, &str)> = vec![
        (format!("the token {TOKEN} was used"), TOKEN),
        (format!("key={OPENAI}&x=1"), OPENAI),
        (format!("{{\"k\":\"{OPENAI}\"}}"), OPENAI),
        (
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123".into(),
            "abcdefghijklmnop",
        ),
        (
            "stripe sk_live_0123456789abcdefABCD ok".into(),
            "0123456789abcdefABCD",
        ),
        (
            "gh ghp_0123456789abcdefghijABCDEFGHIJ0123 x".into(),
            "0123456789abcdefghij",
        ),
        (
            "slack xoxb-1234567890-abcdefghij".into(),
            "1234567890-abcdefghij",
        ),
        ("aws AKIAIOSFODNN7EXAMPLE!".into(), "IOSFODNN7EXAMPLE"),
        (
            "jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4".into(),
            "SflKxwRJSMeKKF2QT4",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
                .into(),
            "MIIEowIBAAKCAQEA",
        ),
        (
            "store postgres://capsaga:pw-0f9e8d7c@127.0.0.1:5432/db unreachable".into(),
            "pw-0f9e8d7c",
        ),
        (
            "upstream said: invalid Authorization: Bearer opaque.value.x12 (401)".into(),
            "opaque.value.x12",
        ),
        (
            "{\"Authorization\":\"Basic dXNlcjpodW50ZXIy\"}".into(),
            "dXNlcjpodW50ZXIy",
        ),
        (
            "&quot;authorization&quot;: &quot;Bearer zzzz-9999&quot;".into(),
            "zzzz-9999",
        ),
        (
            "headers: {\\\"proxy-authorization\\\": \\\"Digest abc123\\\"}".into(),
            "abc123",
        ),
        (
            "got Bearer a1b2c3d4e5f6g7h8i9 back".into(),
            "a1b2c3d4e5f6g7h8i9",
        ),
        (
            "CAPSAGA_KEK=00ff00ff11ee11ee rest".into(),
            "00ff00ff11ee11ee",
        ),
        ("{\"api_key\": \"opaque-value-1\"}".into(), "opaque-value-1"),
        ("x-api-key: opaque-value-2".into(), "opaque-value-2"),
        ("PGPASSWORD=hunter2hunter2".into(), "hunter2hunter2"),
        ("&quot;password&quot;:&quot;hunter3&quot;".into(), "hunter3"),
        ("{\"secret\":\"hunter4\"}".into(), "hunter4"),
        ("client_secret=hunter5".into(), "hunter5"),
        ("cookie: capsaga_console=0123abcd".into(), "0123abcd"),
        ("SECRET_KEY=hunter6".into(), "hunter6"),
        (format!("u=%3D{OPENAI}"), OPENAI),
    ];
    for (text, secret) in cases {
        let out = shapes(&text);
        assert!(!out.contains(secret), "`{secret}` survived in {out}");
        assert!(out.contains(REDACTED), "{out}");
    }
}

#[test]
fn the_hosts_own_words_are_left_alone() {
    for text in [
        "decided by token:alice (operator)",
        "grants: secret:api@127.0.0.1, net:https:127.0.0.1",
        "a valid bearer token is required (Authorization: Bearer <token>)",
        "gen_ai.usage.input_tokens=120 max_tokens: 5 token_count=3",
        "task-0123456789abcdefghijklmnop desk-lamp-0123456789abcdefghij",
        "bearer authentication failed",
        "saga 6f1c2d3e-4b5a-4968-8776-a5b4c3d2e1f0 hash 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "wrote /home/u/ws/notes.txt (120 bytes)",
        "fs_write: permission-denied",
        "https://example.com:443/path",
        "key=notes.txt",
    ] {
        assert_eq!(shapes(text), text, "{text}");
    }
}

#[test]
fn known_values_are_redacted_in_every_encoding() {
    let secret = "Tq9/x+ZK&ey=\"v<1>'#"; // every character an encoding changes
    let s = Scrubber::new([secret, "short"]);
    assert_eq!(s.known(), 1);
    let b64 = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut texts = vec![
        format!("mid {secret} string"),
        serde_json::to_string(&format!("in json {secret}")).unwrap(),
        format!("{:?}", format!("debug {secret}")),
        variants(secret)
            .into_iter()
            .find(|v| v.contains("&amp;"))
            .unwrap(),
        format!("q={}", percent(secret, false)),
        format!("q={}", percent(secret, true)),
        format!("Basic {}", b64.encode(format!("user:{secret}"))),
    ];
    // Inside a longer Base64 text, at each offset.
    for pad in ["", "a", "ab"] {
        texts.push(b64.encode(format!("{pad}{secret} and more")));
        texts.push(url.encode(format!("{pad}{secret}")));
    }
    for t in texts {
        let out = s.scrub(&t);
        assert!(out.contains(REDACTED), "{t} -> {out}");
        none_left(&out, &[secret, &percent(secret, false)]);
    }
    // A value under the minimum length is not matched by value.
    assert_eq!(s.scrub("a short word"), "a short word");
}

#[test]
fn a_known_value_cut_into_pieces_is_redacted_piece_by_piece() {
    let sealed = "orgkey-Zq8Wv3Lm5Np1Rt7Yx2Bc6Df4Gh9Jk0";
    let grant = "grant+val/Pm4Ns7Kd2=Fq9Lx3Ty6Wr";
    let s = Scrubber::new([sealed, grant, TOKEN]);
    let (a, b) = sealed.split_at(17);
    let (t1, rest) = TOKEN.split_at(12);
    let (t2, t3) = rest.split_at(16);
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("config {sealed} end"));
    let cases: Vec<(String, Vec<&str>)> = vec![
        // Two fields of one log line, two attributes, two JSON members.
        (format!(r#"k1="{a}" k2="{b}""#), vec![a, b]),
        (format!(r#"{{"head":"{a}","tail":"{b}"}}"#), vec![a, b]),
        // Three pieces, reversed order, with words glued to them.
        (format!("x={t3}; y=pre{t2}post; z={t1}"), vec![t1, t2, t3]),
        // On two lines.
        (format!("{a}\n{b}"), vec![a, b]),
        // A piece alone.
        (format!("only the tail {b} was logged"), vec![b]),
        // A Base64 text wrapped at 20 columns (a MIME body, a PEM-like
        // blob): no line holds the whole encoded value.
        (
            b64.as_bytes()
                .chunks(20)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join("\r\n"),
            b64.as_bytes()
                .chunks(20)
                .filter(|c| c.len() >= MIN_BASE64_NEEDLE)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .into_iter()
                .skip(1)
                .take(2)
                .collect(),
        ),
        // Percent-encoded, every byte.
        (
            grant.bytes().map(|c| format!("%{c:02X}")).collect(),
            vec!["%67%72%61%6E%74%2B%76%61%6C"],
        ),
        (
            grant.bytes().map(|c| format!("%{c:02x}")).collect(),
            vec!["%67%72%61%6e%74%2b%76%61%6c"],
        ),
    ];
    for (text, pieces) in cases {
        let out = s.scrub(&text).into_owned();
        assert!(out.contains(REDACTED), "{text} -> {out}");
        none_left(&out, &pieces);
        assert_eq!(s.scrub(&out), out, "idempotent");
    }
    // Words around the pieces stay; so do the first letters of a piece
    // before its first run holding a digit ("or" of "orgkey-Zq8..."):
    // plain text alone, they tell nothing of the key.
    let out = s
        .scrub(&format!("before {a} middle {b} after"))
        .into_owned();
    assert_eq!(out, "before or[redacted] middle [redacted] after");
    // A piece shorter than the minimum is left (it tells little).
    let out = s.scrub(&format!("tail {}", &b[b.len() - 5..])).into_owned();
    assert!(!out.contains(REDACTED), "{out}");
}

#[test]
fn a_value_that_is_not_key_like_is_not_cut_into_pieces() {
    // A secret-named variable holding a path or a sentence: matched whole,
    // never by its parts (they are ordinary text).
    let s = Scrubber::new([
        "/run/user/1000/keyring/ssh",
        "unix:path=/run/user/1000/bus",
        "my secret sentence 2024",
    ]);
    assert!(fragments("/run/user/1000/keyring/ssh").is_empty());
    let t = "opened /run/user/1000/other and my secret notes";
    assert_eq!(s.scrub(t), t);
    assert_eq!(
        s.scrub("at unix:path=/run/user/1000/bus."),
        "at [redacted]."
    );
    assert!(!fragments(TOKEN).is_empty());
    assert!(
        fragments(TOKEN)
            .iter()
            .all(|p| !REDACTED.contains(p.as_str()))
    );
}

#[test]
fn words_inside_a_known_value_stay_readable_in_other_text() {
    // A token an operator chose with words in it: the whole value and its
    // random-looking pieces go, the words it contains stay readable in
    // every other sentence (the console says "the operator's policy").
    let secret = "alice-operator-secret-0123456789";
    let s = Scrubber::new([secret]);
    let prose = "the operator's policy asks for a secret review";
    assert_eq!(s.scrub(prose), prose);
    assert_eq!(s.scrub(&format!("token={secret};")), "token=[redacted];");
    let tail = &secret[14..];
    assert!(!s.scrub(&format!("x {tail} y")).contains("0123456789"));
    assert!(
        !fragments(secret)
            .iter()
            .any(|p| p == "operator" || p == "-secret-")
    );
}

#[test]
fn scrubbing_is_idempotent_and_keeps_what_is_not_secret() {
    let s = Scrubber::new(["correct-horse-battery"]);
    let t =
        format!("visible-part correct-horse-battery Authorization: Bearer {TOKEN}; {OPENAI} end");
    let once = s.scrub(&t).into_owned();
    none_left(&once, &["correct-horse-battery", TOKEN, OPENAI]);
    assert!(once.starts_with("visible-part "), "{once}");
    assert!(once.ends_with(" end"), "{once}");
    assert_eq!(s.scrub(&once), once);
    assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
}

#[test]
fn bytes_that_are_not_utf8_are_scrubbed_too() {
    let s = Scrubber::new(["correct-horse-battery"]);
    let mut b = b"\xff\xfe correct-horse-battery ".to_vec();
    b.extend_from_slice(OPENAI.as_bytes());
    let out = s.scrub_bytes(&b);
    let text = String::from_utf8_lossy(&out);
    none_left(&text, &["correct-horse-battery", OPENAI]);
    assert!(matches!(s.scrub_bytes(b"\xff plain"), Cow::Borrowed(_)));
}

proptest::proptest! {
    /// A known secret inside any text, in any of its variants, never
    /// survives, and scrubbing twice changes nothing more.
    #[test]
    fn a_known_secret_never_survives(
        before in "[ -~]{0,40}",
        after in "[ -~]{0,40}",
        secret in "[!-~]{8,24}",
        which in 0usize..16,
    ) {
        let s = Scrubber::new([secret.as_str()]);
        let forms = variants(&secret);
        let form = &forms[which % forms.len()];
        let text = format!("{before}{form}{after}");
        let out = s.scrub(&text).into_owned();
        proptest::prop_assert!(!out.contains(form.as_str()), "{text} -> {out}");
        proptest::prop_assert_eq!(s.scrub(&out).into_owned(), out);
    }
}
