//! URLs built to make two parsers disagree on the host (one family of the
//! URL corpus, `super`).

use super::*;

pub(super) fn parser_confusion() -> Family {
    use Decision::{Allow, Deny};
    let rows: &[(&str, Decision, &str, &str)] = &[
        (
            "http://evil.com@x.example.com/",
            Deny,
            "userinfo",
            "userinfo before a granted host",
        ),
        (
            "http://x.example.com@evil.com/",
            Deny,
            "userinfo",
            "granted host as userinfo (Orange Tsai 2017)",
        ),
        (
            "http://x.example.com:pass@evil.com/",
            Deny,
            "userinfo",
            "userinfo with password",
        ),
        (
            "http://x.example.com%2f@evil.com/",
            Deny,
            "userinfo",
            "encoded slash in userinfo",
        ),
        (
            "http://evil.com%23@x.example.com/",
            Deny,
            "userinfo",
            "encoded hash in userinfo",
        ),
        (
            "http://1.1.1.1 &@2.2.2.2# @3.3.3.3/",
            Deny,
            "userinfo",
            "Orange Tsai 2017 parser differential",
        ),
        (
            "http://@x.example.com/",
            Allow,
            "allowed",
            "empty userinfo is no userinfo",
        ),
        (
            "http://x.example.com\\@evil.com/",
            Allow,
            "allowed",
            "backslash is a path separator in special URLs: host is x.example.com",
        ),
        (
            "http://evil.com\\@x.example.com/",
            Deny,
            "not_granted",
            "backslash: host is evil.com",
        ),
        (
            "http://x.example.com#@evil.com/",
            Allow,
            "allowed",
            "fragment after the host",
        ),
        (
            "http://evil.com#@x.example.com/",
            Deny,
            "not_granted",
            "fragment hides the granted name",
        ),
        (
            "http://x.example.com?@evil.com/",
            Allow,
            "allowed",
            "query after the host",
        ),
        (
            "http://evil.com?.x.example.com/",
            Deny,
            "not_granted",
            "query hides the granted name",
        ),
        (
            "http://evil.com/.x.example.com",
            Deny,
            "not_granted",
            "path hides the granted name",
        ),
        (
            "http://x.example.com.evil.com/",
            Deny,
            "not_granted",
            "granted name as a prefix",
        ),
        (
            "http://evilx.example.com.evil.com/",
            Deny,
            "not_granted",
            "granted suffix in the middle",
        ),
        (
            "http://x.example.com%00.evil.com/",
            Deny,
            "bad_url",
            "encoded NUL in host",
        ),
        (
            "http://x.example.com\u{0}.evil.com/",
            Deny,
            "bad_url",
            "raw NUL in host",
        ),
        (
            "http://x.example.com\t/",
            Deny,
            "host_spelling",
            "tabs are removed by the parser: refused",
        ),
        (
            "http://x.exa\nmple.com/",
            Deny,
            "host_spelling",
            "newlines are removed by the parser: refused",
        ),
        (
            "http://x.exa\rmple.com/",
            Deny,
            "host_spelling",
            "carriage returns are removed by the parser: refused",
        ),
        (
            "  http://x.example.com/  ",
            Allow,
            "allowed",
            "surrounding spaces are trimmed",
        ),
        (
            "http:x.example.com/",
            Allow,
            "allowed",
            "special scheme without slashes",
        ),
        ("http:/x.example.com/", Allow, "allowed", "one slash"),
        ("http:\\\\x.example.com\\", Allow, "allowed", "backslashes"),
        ("http:///x.example.com/", Allow, "allowed", "three slashes"),
        ("HTTP://X.EXAMPLE.COM/", Allow, "allowed", "upper case"),
        ("http://x.example.com./", Allow, "allowed", "trailing dot"),
        (
            "http://x.example.com../",
            Deny,
            "bad_url",
            "two trailing dots",
        ),
        ("http://x..example.com/", Deny, "bad_url", "empty label"),
        (
            "http://\u{24E7}.example.com/",
            Deny,
            "host_spelling",
            "circled x, folded by IDNA: refused, not folded",
        ),
        (
            "http://\u{FF58}.example.com/",
            Deny,
            "host_spelling",
            "fullwidth x, folded by IDNA",
        ),
        (
            "http://\u{1D431}.example.com/",
            Deny,
            "host_spelling",
            "mathematical bold x",
        ),
        (
            "http://\u{2093}.example.com/",
            Deny,
            "host_spelling",
            "subscript x",
        ),
        (
            "http://X.EXAMPLE\u{FF0E}COM/",
            Deny,
            "host_spelling",
            "fullwidth full stop, upper case around it",
        ),
        (
            "http://x.example.com\u{3002}/",
            Deny,
            "host_spelling",
            "ideographic full stop, mapped to `.`",
        ),
        (
            "http://x\u{FF0E}example\u{FF0E}com/",
            Deny,
            "host_spelling",
            "fullwidth full stops",
        ),
        (
            "http://x\u{FF61}example.com/",
            Deny,
            "host_spelling",
            "halfwidth ideographic full stop",
        ),
        (
            "http://x.exam\u{AD}ple.com/",
            Deny,
            "host_spelling",
            "soft hyphen, dropped by IDNA",
        ),
        (
            "http://x.exam\u{200D}ple.com/",
            Deny,
            "bad_url",
            "zero-width joiner: refused by IDNA itself (CONTEXTJ)",
        ),
        (
            "http://x.exam\u{FE00}ple.com/",
            Deny,
            "host_spelling",
            "variation selector, dropped by IDNA",
        ),
        (
            "http://x.exam\u{034F}ple.com/",
            Deny,
            "host_spelling",
            "combining grapheme joiner, dropped by IDNA",
        ),
        (
            "http://x.e\u{212A}ample.com/",
            Deny,
            "host_spelling",
            "Kelvin sign, folded to k by IDNA",
        ),
        (
            "http://x.example.\u{217D}om/",
            Deny,
            "host_spelling",
            "roman numeral one hundred (c)",
        ),
        (
            "http://x%2eexample.com/",
            Deny,
            "host_spelling",
            "percent-encoded dot in host",
        ),
        (
            "http://%78.example.com/",
            Deny,
            "host_spelling",
            "percent-encoded letter in host",
        ),
        (
            "http://%EF%BD%98.example.com/",
            Deny,
            "host_spelling",
            "percent-encoded fullwidth x",
        ),
        (
            "http://x.ex\u{0430}mple.com/",
            Deny,
            "not_granted",
            "Cyrillic а: a different (punycode) name",
        ),
        (
            "http://x.example.com:80/",
            Allow,
            "allowed",
            "explicit default port",
        ),
        (
            "http://x.example.com:0080/",
            Allow,
            "allowed",
            "port with leading zeros is 80",
        ),
        (
            "http://x.example.com:/",
            Allow,
            "allowed",
            "empty port is the default",
        ),
        (
            "http://x.example.com:8080/",
            Deny,
            "not_granted",
            "other port",
        ),
        (
            "http://x.example.com:443/",
            Deny,
            "not_granted",
            "the https port over http",
        ),
        (
            "https://x.example.com:80/",
            Deny,
            "not_granted",
            "the http port over https",
        ),
        (
            "http://x.example.com:65536/",
            Deny,
            "bad_url",
            "port out of range",
        ),
        ("http://x.example.com:-1/", Deny, "bad_url", "negative port"),
        (
            "http://x.example.com:8o/",
            Deny,
            "bad_url",
            "letter in port",
        ),
        (
            "http://[::ffff:127.0.0.1]/",
            Deny,
            "not_granted",
            "IPv4-mapped literal",
        ),
        (
            "http://[::ffff:7f00:1]/",
            Deny,
            "not_granted",
            "IPv4-mapped literal, hex groups",
        ),
        (
            "http://[fe80::1%25eth0]/",
            Deny,
            "bad_url",
            "zone identifier",
        ),
        ("http://[::1/", Deny, "bad_url", "unclosed bracket"),
        (
            "http://127.0.0.1.nip.io/",
            Deny,
            "not_granted",
            "nip.io name not granted",
        ),
        (
            "http://x.example.com/../../etc/passwd",
            Allow,
            "allowed",
            "path traversal is the server's business",
        ),
        (
            "http://localhost/",
            Deny,
            "not_granted",
            "localhost not granted",
        ),
        ("http://0/", Deny, "not_granted", "0 is 0.0.0.0"),
        ("http://[::]/", Deny, "not_granted", "unspecified IPv6"),
    ];
    let mut cases: Vec<Case> = rows
        .iter()
        .map(|(u, e, k, note)| usual_dns(url(*u, *e, k)).note(*note))
        .collect();
    cases.push(
        usual_dns(url(
            format!("http://x.example.com/{}", "a".repeat(8200)),
            Deny,
            "bad_url",
        ))
        .note("longer than 8 KiB"),
    );
    Family {
        name: "url_parser_confusion",
        doc: "URLs built to make two parsers disagree on the host (Orange Tsai, A New Era of SSRF, Black Hat 2017; PayloadsAllTheThings): userinfo, backslashes, fragments, queries and paths hiding or faking the granted name, NUL, tabs and newlines, missing or extra slashes, case, trailing dots, empty labels, IDNA mappings (circled, fullwidth, mathematical and subscript letters, ideographic, fullwidth and halfwidth full stops, soft hyphens, joiners and variation selectors IDNA drops) and percent-encoded hosts, all refused as written rather than folded (issue 24 item 8a), homographs, ports spelled oddly or out of range, IPv6 literals with zones: the guard decides on the host the `url` crate extracts, which is the host connected to",
        cases,
    }
}
