//! The same-origin rule of the console's POSTs.

use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn only_the_consoles_own_origin_may_post() {
    let own = [
        ("host", "127.0.0.1:8000"),
        ("origin", "http://127.0.0.1:8000"),
    ];
    assert!(same_origin(&headers(&own)));
    assert!(
        same_origin(&headers(&[("host", "127.0.0.1:8000")])),
        "not a browser"
    );
    for bad in [
        [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:9000"),
        ],
        [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://localhost:8000"),
        ],
        [("host", "127.0.0.1:8000"), ("origin", "null")],
        [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000.evil"),
        ],
        [("host", ""), ("origin", "http://")],
    ] {
        assert!(!same_origin(&headers(&bad)), "{bad:?}");
    }
    let cross = [("host", "127.0.0.1:8000"), ("sec-fetch-site", "same-site")];
    assert!(!same_origin(&headers(&cross)));
    let own_fetch = [
        ("host", "127.0.0.1:8000"),
        ("sec-fetch-site", "same-origin"),
    ];
    assert!(same_origin(&headers(&own_fetch)));
}
