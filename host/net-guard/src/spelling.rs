//! How a URL's host is *written* (issue 24 item 8a): a host that the URL
//! parser would fold onto another name is refused, not folded.
//!
//! The WHATWG parser (the `url` crate) maps a host written with
//! compatibility characters onto plain ASCII: fullwidth letters and digits
//! (`ｅxample.com`, `１２７.0.0.1`), circled and mathematical letters,
//! the ideographic and fullwidth full stops (U+3002, U+FF0E, U+FF61) as
//! `.`, and it drops what IDNA maps to nothing (soft hyphen U+00AD,
//! zero-width joiners, variation selectors), percent-decodes the host
//! (`%65xample.com`), and removes tabs and line breaks anywhere in the URL.
//! Each is a way to slip a name past a string filter (a log, a reviewer, a
//! proxy rule) that the host then connects to all the same. So the guard
//! decides on the parsed host only when the host as written is already
//! that host's own spelling:
//!
//! - the URL holds no tab, line feed or carriage return;
//! - the written host holds no `%`;
//! - an IP literal is written in ASCII;
//! - a name is written either as its ASCII form (A-labels, any ASCII case)
//!   or as its Unicode form (U-labels exactly as IDNA's `to_unicode`
//!   returns them: NFC, lower case, nothing mapped or dropped).
//!
//! `bücher.example` and `xn--bcher-kva.example` pass (one name, its two
//! spellings); `EXAMPLE.com` passes (DNS is case-insensitive and ASCII case
//! is not a compatibility mapping); `ｅxample.com`, `example。com`,
//! `exam\u{AD}ple.com` and `%65xample.com` are refused.
//!
//! The written host is found as the WHATWG parser finds it in an `http` or
//! `https` URL: after the scheme's `:` and any run of `/` or `\`, up to the
//! first `/`, `\`, `?` or `#`; after the last `@`; before a `:` outside
//! brackets. When that text does not denote the host the parser returned,
//! the URL is refused too (fail closed).

use url::{Host, Url};

/// Why a host's spelling was refused, for [`super::NetDenied::HostSpelling`].
pub(super) fn check(raw: &str, parsed: &Url) -> Result<(), &'static str> {
    if raw.contains(['\t', '\n', '\r']) {
        return Err("the URL contains a tab or line break, which URL parsers remove silently");
    }
    let Some(written) = written_host(raw) else {
        return Err("the host as written could not be found");
    };
    if written.contains('%') {
        return Err("the host is percent-encoded; write it plainly");
    }
    match parsed.host() {
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => {
            if !written.is_ascii() {
                return Err(
                    "the IP address is written with non-ASCII (fullwidth or compatibility) characters",
                );
            }
            Ok(())
        }
        Some(Host::Domain(ascii)) => {
            let written = written.to_ascii_lowercase();
            if written == ascii {
                return Ok(());
            }
            let (unicode, ok) = idna::domain_to_unicode(ascii);
            if ok.is_ok() && written == unicode {
                return Ok(());
            }
            Err(
                "the host name is written with characters the URL parser folds or drops (fullwidth or compatibility letters and digits, ideographic or fullwidth full stops, soft hyphens, zero-width characters); write the name itself",
            )
        }
        None => Err("no host"),
    }
}

/// The host of an `http(s)` URL as written (see the module documentation).
fn written_host(raw: &str) -> Option<&str> {
    let trimmed = raw.trim_matches(|c: char| c <= ' ');
    let (_, rest) = trimmed.split_once(':')?;
    let rest = rest.trim_start_matches(['/', '\\']);
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        let close = host_port.find(']')?;
        return Some(&host_port[..=close]);
    }
    Some(host_port.split(':').next().unwrap_or(host_port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelt(raw: &str) -> Result<(), &'static str> {
        check(raw, &Url::parse(raw).expect(raw))
    }

    #[test]
    fn the_host_as_written() {
        assert_eq!(written_host("http://a.example/x"), Some("a.example"));
        assert_eq!(written_host("HTTP:\\\\a.example\\x"), Some("a.example"));
        assert_eq!(written_host("http:a.example"), Some("a.example"));
        assert_eq!(
            written_host("http://u:p@a.example:8080/"),
            Some("a.example")
        );
        assert_eq!(written_host("http://a@b@c.example?x"), Some("c.example"));
        assert_eq!(written_host("http://[::1]:80/"), Some("[::1]"));
        assert_eq!(written_host("http://a.example#@b/"), Some("a.example"));
        assert_eq!(written_host("  http://a.example/  "), Some("a.example"));
    }

    #[test]
    fn own_spellings_pass() {
        for ok in [
            "http://example.com/",
            "http://EXAMPLE.COM/",
            "http://example.com./",
            "http://example.com:8080/x",
            "https://bücher.example/",
            "https://xn--bcher-kva.example/",
            "http://127.0.0.1/",
            "http://0x7f.1/",
            "http://[::1]/",
            "http://@example.com/",
            "http:\\\\example.com\\",
        ] {
            assert_eq!(spelt(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn folded_spellings_are_refused() {
        for bad in [
            "http://\u{FF45}xample.com/",
            "http://\u{24D4}xample.com/",
            "http://\u{1D41E}xample.com/",
            "http://EXAMPLE\u{FF0E}com/",
            "http://example\u{3002}com/",
            "http://example\u{FF61}com/",
            "http://exam\u{AD}ple.com/",
            "http://exam\u{200D}ple.com/",
            "http://example.com\u{FE0F}/",
            "http://%65xample.com/",
            "http://example%2ecom/",
            "http://\u{FF11}\u{FF12}\u{FF17}.0.0.1/",
            "http://127\u{FF0E}0.0.1/",
            "http://127\u{3002}0.0.1/",
            "http://exa\tmple.com/",
            "http://exa\nmple.com/",
            "http://example.com\r/",
            "https://BÜCHER.example/",
            "https://bu\u{308}cher.example/",
            "https://ﬁle.example/",
            "http://\u{212A}.example/",
        ] {
            if let Ok(u) = Url::parse(bad) {
                assert!(check(bad, &u).is_err(), "{bad} -> {u}");
            }
        }
    }
}
