//! IPv6 addresses that carry an IPv4 address (mapped, compatible, SIIT,
//! NAT64, 6to4, Teredo): pure address arithmetic, shared by the capability
//! grammar (a grant spelt this way is read as its IPv4 address) and the net
//! guard (a URL or a resolved address likewise), so the two cannot disagree
//! and neither imports the other.

use std::net::{Ipv4Addr, Ipv6Addr};

/// How an IPv6 address carries an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Embedding {
    /// `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2).
    Ipv4Mapped,
    /// `::a.b.c.d` (deprecated, RFC 4291 §2.5.5.1).
    Ipv4Compatible,
    /// `::ffff:0:a.b.c.d` (SIIT, RFC 2765).
    Ipv4Translated,
    /// `64:ff9b::a.b.c.d` (well-known NAT64 prefix, RFC 6052).
    Nat64,
    /// `2002:aabb:ccdd::/48` (6to4, RFC 3056): the 6to4 router's IPv4.
    SixToFour,
    /// `64:ff9b:1::a.b.c.d` (local-use NAT64 prefix, RFC 8215), read with the
    /// RFC 6052 /96 layout (the IPv4 address in the last 32 bits).
    Nat64Local,
    /// `2001:0:ssss:ssss:flags:port:cccc:cccc` (Teredo, RFC 4380 §4): the
    /// client's IPv4 address, stored inverted in the last 32 bits.
    Teredo,
}

impl Embedding {
    /// Short name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Embedding::Ipv4Mapped => "IPv4-mapped",
            Embedding::Ipv4Compatible => "IPv4-compatible",
            Embedding::Ipv4Translated => "IPv4-translated",
            Embedding::Nat64 => "NAT64",
            Embedding::SixToFour => "6to4",
            Embedding::Nat64Local => "local-use NAT64",
            Embedding::Teredo => "Teredo",
        }
    }
}

/// The IPv4 address an IPv6 address carries, and how, if it is one of the
/// embedding forms this module knows (see [`Embedding`]): IPv4-mapped,
/// SIIT, IPv4-compatible (not `::` and `::1`, which are themselves), NAT64
/// (well-known and local-use prefixes), 6to4 (the router's address) and
/// Teredo (the client's address). The net guard reads such a literal as the
/// IPv4 address it carries, in grants and in URLs alike.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<(Embedding, Ipv4Addr)> {
    let s = ip.segments();
    let o = ip.octets();
    let low32 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some((Embedding::Ipv4Mapped, low32));
    }
    if s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0 {
        return Some((Embedding::Ipv4Translated, low32));
    }
    // `::` and `::1` are themselves, not 0.0.0.0 and 0.0.0.1.
    if s[..6] == [0, 0, 0, 0, 0, 0] && u32::from(low32) > 1 {
        return Some((Embedding::Ipv4Compatible, low32));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some((Embedding::Nat64, low32));
    }
    if s[..3] == [0x64, 0xff9b, 1] {
        return Some((Embedding::Nat64Local, low32));
    }
    if s[0] == 0x2002 {
        return Some((Embedding::SixToFour, Ipv4Addr::new(o[2], o[3], o[4], o[5])));
    }
    if s[..2] == [0x2001, 0] {
        return Some((Embedding::Teredo, Ipv4Addr::from(!u32::from(low32))));
    }
    None
}
