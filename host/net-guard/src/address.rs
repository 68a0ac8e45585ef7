//! Classification of IP addresses for the net guard: which destinations a
//! guest may reach through a DNS name (only [`AddressClass::Public`] ones),
//! and which a grant naming the literal address can open up.
//!
//! Sources: the IANA IPv4 and IPv6 Special-Purpose Address Registries
//! (RFC 6890 and its updates), RFC 1918 (private), RFC 6598 (CGNAT), RFC 3927
//! and RFC 4291 §2.5.6 (link-local), RFC 5737 / RFC 3849 / RFC 9637
//! (documentation), RFC 2544 / RFC 5180 (benchmarking), RFC 4193 (ULA),
//! RFC 3879 (deprecated site-local), RFC 4291 §2.5.5 (IPv4-compatible and
//! IPv4-mapped), RFC 6052 / RFC 8215 (NAT64), RFC 3056 (6to4), RFC 4380
//! (Teredo), RFC 6666 (discard-only), RFC 9602 (SRv6 SIDs), and the cloud
//! providers' documented instance-metadata endpoints.
//!
//! IPv6 is decided by allowlist: only global unicast (`2000::/3`) outside the
//! special blocks is public, and the forms that embed an IPv4 address
//! (IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96`, SIIT
//! `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96` and the local-use `64:ff9b:1::/48`,
//! 6to4 `2002::/16`, Teredo `2001::/32`) are classified by the IPv4 address
//! they carry ([`embedded_ipv4`]); the local-use NAT64 and Teredo forms are
//! never public even when that address is, because the address they carry
//! is not the whole story (a local translator, an obfuscated client behind a
//! relay).

use ipnet::{Ipv4Net, Ipv6Net};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use capsaga_core::ip_embedding::{Embedding, embedded_ipv4};

/// What kind of destination an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressClass {
    /// Globally reachable unicast: the only class a DNS name may resolve to.
    Public,
    /// `0.0.0.0/8` "this network", `::`: connecting there reaches the local host.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT shared space.
    SharedCgnat,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// A cloud provider's instance-metadata or host endpoint
    /// (`169.254.169.254`, `168.63.129.16`, `100.100.100.200`, `fd00:ec2::254`, ...).
    CloudMetadata,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `fc00::/7`, unique local addresses.
    UniqueLocal,
    /// `fec0::/10`, deprecated site-local addresses.
    SiteLocal,
    /// `64:ff9b:1::/48`, NAT64 for local use.
    Nat64Local,
    /// `2001::/32`, Teredo tunnelling (the client address is obfuscated).
    Teredo,
    /// Reserved, unallocated, protocol-assignment or deprecated space
    /// (`240.0.0.0/4`, `192.0.0.0/24`, `192.88.99.0/24`, `100::/64`,
    /// `2001::/23`, `5f00::/16`, IPv6 outside `2000::/3`, ...).
    Reserved,
}

impl AddressClass {
    /// Short name used in error messages: `loopback`, `private`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::SharedCgnat => "shared (CGNAT)",
            AddressClass::LinkLocal => "link-local",
            AddressClass::CloudMetadata => "cloud metadata",
            AddressClass::Documentation => "documentation",
            AddressClass::Benchmarking => "benchmarking",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::UniqueLocal => "unique local",
            AddressClass::SiteLocal => "site-local",
            AddressClass::Nat64Local => "local-use NAT64",
            AddressClass::Teredo => "Teredo",
            AddressClass::Reserved => "reserved",
        }
    }

    /// True for classes that are never a unicast destination (unspecified,
    /// multicast, broadcast): refused even when a grant names the literal.
    pub fn never_unicast(self) -> bool {
        matches!(
            self,
            AddressClass::Unspecified | AddressClass::Multicast | AddressClass::Broadcast
        )
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(s: [u16; 8], len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    )
}

/// Cloud instance-metadata and host endpoints, checked before the ranges
/// they sit in so that messages name them.
const METADATA_V4: [Ipv4Addr; 7] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle...
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(169, 254, 170, 23),  // AWS EKS pod identity
    Ipv4Addr::new(169, 254, 169, 253), // AWS VPC DNS
    Ipv4Addr::new(168, 63, 129, 16),   // Azure WireServer (a public address)
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
    Ipv4Addr::new(192, 0, 0, 192),     // Oracle Cloud
];
const METADATA_V6: [Ipv6Addr; 2] = [
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), // AWS IMDS over IPv6
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),  // AWS EKS pod identity
];

/// IPv4 special-purpose blocks that are not globally reachable, most
/// specific first where they nest. (The globally reachable special-purpose
/// anycast blocks, AS112 and AMT, stay public.)
const V4_BLOCKS: [(Ipv4Net, AddressClass); 16] = [
    (v4(255, 255, 255, 255, 32), AddressClass::Broadcast),
    (v4(0, 0, 0, 0, 8), AddressClass::Unspecified),
    (v4(10, 0, 0, 0, 8), AddressClass::Private),
    (v4(100, 64, 0, 0, 10), AddressClass::SharedCgnat),
    (v4(127, 0, 0, 0, 8), AddressClass::Loopback),
    (v4(169, 254, 0, 0, 16), AddressClass::LinkLocal),
    (v4(172, 16, 0, 0, 12), AddressClass::Private),
    (v4(192, 0, 0, 0, 24), AddressClass::Reserved),
    (v4(192, 0, 2, 0, 24), AddressClass::Documentation),
    (v4(192, 88, 99, 0, 24), AddressClass::Reserved),
    (v4(192, 168, 0, 0, 16), AddressClass::Private),
    (v4(198, 18, 0, 0, 15), AddressClass::Benchmarking),
    (v4(198, 51, 100, 0, 24), AddressClass::Documentation),
    (v4(203, 0, 113, 0, 24), AddressClass::Documentation),
    (v4(224, 0, 0, 0, 4), AddressClass::Multicast),
    (v4(240, 0, 0, 0, 4), AddressClass::Reserved),
];

/// IPv6 special-purpose blocks inside or next to `2000::/3`, most specific
/// first where they nest (embedded-IPv4 forms are handled before these).
const V6_BLOCKS: [(Ipv6Net, AddressClass); 13] = [
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), AddressClass::Unspecified),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), AddressClass::Loopback),
    (
        v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        AddressClass::Nat64Local,
    ),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), AddressClass::Reserved),
    (
        v6([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48),
        AddressClass::Benchmarking,
    ),
    (
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        AddressClass::Documentation,
    ),
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), AddressClass::Teredo),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        AddressClass::Reserved,
    ),
    (
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        AddressClass::Documentation,
    ),
    (
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),
        AddressClass::Reserved,
    ),
    (
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        AddressClass::UniqueLocal,
    ),
    (
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        AddressClass::LinkLocal,
    ),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        AddressClass::SiteLocal,
    ),
];

/// The class of an IPv4 address.
pub fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    if METADATA_V4.contains(&ip) {
        return AddressClass::CloudMetadata;
    }
    V4_BLOCKS
        .iter()
        .find(|(net, _)| net.contains(&ip))
        .map_or(AddressClass::Public, |(_, class)| *class)
}

/// The class of an IPv6 address. Embedded IPv4 forms take the class of the
/// IPv4 address they carry, except that a local-use NAT64 or Teredo address
/// carrying a public one stays [`AddressClass::Nat64Local`] or
/// [`AddressClass::Teredo`]; everything outside `2000::/3` that no block
/// names is [`AddressClass::Reserved`].
pub fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    if METADATA_V6.contains(&ip) {
        return AddressClass::CloudMetadata;
    }
    if let Some((how, inner)) = embedded_ipv4(ip) {
        return match (how, classify_v4(inner)) {
            (Embedding::Nat64Local, AddressClass::Public) => AddressClass::Nat64Local,
            (Embedding::Teredo, AddressClass::Public) => AddressClass::Teredo,
            (_, class) => class,
        };
    }
    if let Some((_, class)) = V6_BLOCKS.iter().find(|(net, _)| net.contains(&ip)) {
        return *class;
    }
    if ip.segments()[0] >= 0xff00 {
        return AddressClass::Multicast;
    }
    // Global unicast is 2000::/3; the rest is reserved by the IETF.
    if ip.segments()[0] & 0xe000 == 0x2000 {
        AddressClass::Public
    } else {
        AddressClass::Reserved
    }
}

/// An IP literal as the net guard reads it: an IPv6 address carrying an
/// IPv4 address ([`embedded_ipv4`]) is that IPv4 address; any other address
/// is itself. Applied to IP literals in grants and in URLs, so that the
/// IPv4 rules (one spelling, a literal grant opens that address only) hold
/// whatever IPv6 form the address is dressed in.
pub fn as_ipv4_if_embedded(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_ipv4(v6).map_or(ip, |(_, v4)| IpAddr::V4(v4)),
        IpAddr::V4(_) => ip,
    }
}

/// The class of any IP address.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v) => classify_v4(v),
        IpAddr::V6(v) => classify_v6(v),
    }
}

/// A description for messages: `127.0.0.1 (loopback)`, or
/// `::ffff:7f00:1 (IPv4-mapped 127.0.0.1, loopback)`.
pub fn describe(ip: IpAddr) -> String {
    let class = classify(ip);
    match ip {
        IpAddr::V6(v6) => match embedded_ipv4(v6) {
            Some((how, inner)) => format!("{ip} ({} {inner}, {class})", how.as_str()),
            None => format!("{ip} ({class})"),
        },
        IpAddr::V4(_) => format!("{ip} ({class})"),
    }
}
