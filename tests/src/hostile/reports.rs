//! Hand-written cases taken from public bug reports and bypass lists, each
//! with its source in the note: path-traversal CVEs replayed against the
//! path guard, SSRF address tricks replayed against the capability grammar.
//! (The same tricks as URLs are in the url families.)

use super::Family;
use super::paths::WS_GRANT;
use capsaga_check::corpus::Case;
use capsaga_check::{Decision, Guard};

fn path(input: &str, expect: Decision, kind: &str, source: &str) -> Case {
    Case::new(Guard::Path, input, expect)
        .grants(&[WS_GRANT])
        .kind(kind)
        .note(source)
}

fn cap(input: &str, expect: Decision, source: &str) -> Case {
    let kind = if expect == Decision::Allow {
        "valid"
    } else {
        "invalid_capability"
    };
    Case::new(Guard::Capability, input, expect)
        .kind(kind)
        .note(source)
}

/// Every family of hand-written cases.
pub fn families() -> Vec<Family> {
    vec![path_cves(), ssrf_hosts_in_grants()]
}

fn path_cves() -> Family {
    use Decision::{Allow, Deny};
    let cases = vec![
        path(
            "cgi-bin/.%2e/.%2e/.%2e/.%2e/etc/passwd",
            Allow,
            "allowed",
            "CVE-2021-41773 Apache 2.4.49, as sent: literal names",
        ),
        path(
            "cgi-bin/../../../../etc/passwd",
            Deny,
            "escapes_root",
            "CVE-2021-41773 Apache 2.4.49, decoded",
        ),
        path(
            "cgi-bin/%%32%65%%32%65/%%32%65%%32%65/etc/passwd",
            Allow,
            "allowed",
            "CVE-2021-42013 Apache 2.4.50 double encoding, as sent",
        ),
        path(
            "icons/.%%32%65/.%%32%65/.%%32%65/etc/passwd",
            Allow,
            "allowed",
            "CVE-2021-42013 variant, as sent",
        ),
        path(
            "dana-na/../dana/html5acc/guacamole/../../../../../../etc/passwd",
            Deny,
            "escapes_root",
            "CVE-2019-11510 Pulse Connect Secure",
        ),
        path(
            "remote/fgt_lang?lang=/../../../..//////////dev/cmdb/sslvpn_websession",
            Deny,
            "escapes_root",
            "CVE-2018-13379 Fortinet FortiOS",
        ),
        path(
            "tmui/login.jsp/..;/tmui/locallb/workspace/fileRead.jsp",
            Allow,
            "allowed",
            "CVE-2020-5902 F5 BIG-IP `..;`: a literal name here",
        ),
        path(
            "scripts/..%c0%af../winnt/system32/cmd.exe",
            Deny,
            "special_name",
            "CVE-2000-0884 IIS overlong UTF-8 (the literal name ends in a dot)",
        ),
        path(
            "scripts/..%255c../winnt/system32/cmd.exe",
            Deny,
            "special_name",
            "CVE-2001-0333 IIS double decode (the literal name ends in a dot)",
        ),
        path(
            "scripts/..\\../winnt/system32/cmd.exe",
            Deny,
            "special_name",
            "CVE-2001-0333 IIS, decoded",
        ),
        path(
            "..\\..\\..\\windows\\win.ini",
            Deny,
            "special_name",
            "CVE-2018-1271 Spring MVC on Windows",
        ),
        path(
            "default.asp::$DATA",
            Deny,
            "special_name",
            "CVE-1999-0278 IIS ::$DATA source disclosure",
        ),
        path(
            "../../../../../../tmp/evil.sh",
            Deny,
            "escapes_root",
            "Zip Slip (Snyk 2018) archive entry",
        ),
        path(
            "good/../../evil.sh",
            Deny,
            "escapes_root",
            "Zip Slip entry hidden behind a directory",
        ),
        path(
            "../../../../etc/cron.d/evil",
            Deny,
            "escapes_root",
            "CVE-2007-4559 Python tarfile",
        ),
        path(
            "////etc/passwd",
            Deny,
            "outside_root",
            "CVE-2021-32804 node-tar stripped one leading `/` only",
        ),
        path(
            "c:../../evil",
            Deny,
            "special_name",
            "CVE-2021-37712 node-tar drive-relative path",
        ),
        path(
            "${home}/ws/link_up/secret.txt",
            Deny,
            "symlink_escape",
            "CVE-2021-32803 node-tar: a planted symlink, then a write through it",
        ),
        path(
            "${home}/ws/link_secret",
            Deny,
            "symlink_escape",
            "CVE-2018-15664 docker cp: a symlink in the container pointing out",
        ),
        path(
            "sub/link_up2/secret.txt",
            Deny,
            "symlink_escape",
            "CVE-2024-21626 runc class: a path leading out of the root via a link",
        ),
        path(
            "aux.txt",
            Deny,
            "special_name",
            "CVE-2000-0168 Windows DOS device names in paths",
        ),
        path(
            "sub/con/con",
            Deny,
            "special_name",
            "CVE-2000-0168 `con\\con`",
        ),
        path(
            "sub/a.txt .",
            Deny,
            "special_name",
            "CVE-2013-4547 nginx: trailing space and dot",
        ),
        path(
            "/proc/self/root/etc/shadow",
            Deny,
            "outside_root",
            "procfs root detour",
        ),
        path(
            "${home}/ws/sub/..\u{2215}..\u{2215}secret.txt",
            Allow,
            "allowed",
            "Unicode division slash is not `/` (Unicode TR36 confusables)",
        ),
    ];
    Family {
        name: "reports_path_cves",
        doc: "path-traversal payloads from public CVEs (Apache, Pulse Secure, Fortinet, F5, IIS, Spring, Zip Slip, Python tarfile, node-tar, docker cp, runc, nginx, Windows devices), as sent and decoded",
        cases,
    }
}

fn ssrf_hosts_in_grants() -> Family {
    use Decision::{Allow, Deny};
    let pat = "PayloadsAllTheThings SSRF bypass list";
    let cases = vec![
        cap("net:http:127.1", Deny, pat),
        cap("net:http:127.0.1", Deny, pat),
        cap("net:http:0", Deny, pat),
        cap("net:http:0177.0.0.1", Deny, pat),
        cap("net:http:2130706433", Deny, pat),
        cap("net:http:0x7f000001", Deny, pat),
        cap("net:http:0x7f.0x00.0x00.0x01", Deny, pat),
        cap("net:http:017700000001", Deny, pat),
        cap("net:http:127.000.000.1", Deny, pat),
        cap(
            "net:http:localhost",
            Allow,
            "a name: the net guard resolves it and refuses loopback",
        ),
        cap(
            "net:http:[::]",
            Allow,
            "the unspecified address as a literal grant: the net guard refuses to connect to it",
        ),
        cap(
            "net:http:[0:0:0:0:0:ffff:127.0.0.1]",
            Deny,
            "IPv4-mapped loopback: an IPv4 address has one spelling in a grant",
        ),
        cap(
            "net:http:①②⑦.⓪.⓪.①",
            Deny,
            "enclosed alphanumerics (PayloadsAllTheThings)",
        ),
        cap(
            "net:http:127.0.0.1.nip.io",
            Allow,
            "wildcard DNS (nip.io): a valid name; it resolves to 127.0.0.1 and the net guard refuses loopback",
        ),
        cap(
            "net:http:127.0.0.1.nip.io.",
            Allow,
            "the same with a trailing dot",
        ),
        cap(
            "net:http:nip.io.127.0.0.1",
            Deny,
            "a name ending in a number is an IPv4 address to WHATWG parsers: refused",
        ),
        cap(
            "net:http:spoofed.burpcollaborator.net",
            Allow,
            "a DNS name: resolution is the net guard's job",
        ),
        cap(
            "net:http:169.254.169.254",
            Allow,
            "AWS/GCP/Azure metadata as a literal grant: only when the operator names it",
        ),
        cap(
            "net:http:[fd00:ec2::254]",
            Allow,
            "AWS IMDS over IPv6, literal grant",
        ),
        cap(
            "net:http:metadata.google.internal",
            Allow,
            "GCP metadata name: refused at resolution (link-local)",
        ),
        cap(
            "net:http:100.100.100.200",
            Allow,
            "Alibaba metadata, literal grant",
        ),
        cap(
            "net:http:127.0.0.1:80\\@evil.com",
            Deny,
            "Orange Tsai, A New Era of SSRF (Black Hat 2017)",
        ),
        cap(
            "net:http:evil.com@127.0.0.1",
            Deny,
            "userinfo confusion (Orange Tsai 2017)",
        ),
        cap(
            "net:http:127.0.0.1#@evil.com",
            Deny,
            "fragment confusion (Orange Tsai 2017)",
        ),
        cap(
            "net:http:1.1.1.1 &@2.2.2.2# @3.3.3.3",
            Deny,
            "parser differential (Orange Tsai 2017)",
        ),
        cap("net:http:0x7f.1", Deny, "inet_aton mixed forms"),
        cap(
            "net:http:[::ffff:7f00:1]",
            Deny,
            "IPv4-mapped in hex groups: write 127.0.0.1",
        ),
        cap(
            "net:http:[fe80::1%25eth0]",
            Deny,
            "zone identifier (RFC 6874)",
        ),
        cap("net:http:[fe80::1%eth0]", Deny, "zone identifier"),
        cap(
            "net:https:exаmple.com",
            Deny,
            "IDN homograph (Cyrillic а): names must be punycode",
        ),
        cap(
            "net:https:xn--exmple-4nf.com",
            Allow,
            "the punycode form is what an operator names",
        ),
    ];
    Family {
        name: "reports_ssrf_in_grants",
        doc: "SSRF bypass hosts from public lists (PayloadsAllTheThings, Orange Tsai's Black Hat 2017 parser differentials, cloud metadata endpoints, nip.io, enclosed alphanumerics, IDN homographs, zone ids) written as `net:` grants: refused unless canonical; names and literals the operator writes are accepted and left to the net guard",
        cases,
    }
}
