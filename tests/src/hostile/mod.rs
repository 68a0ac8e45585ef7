//! The hostile corpus: inputs an attacker would send to capsaga's guards,
//! each with the decision the guard must reach, generated from named and
//! documented families.
//!
//! A family is a rule that produces cases, not a list: e.g. `dotdot_climb`
//! combines prefixes of known physical depth (through plain directories and
//! symlinks) with runs of `..`, separators and absolute or relative forms,
//! and expects "allowed" exactly when the climb stays inside. Hand-written
//! cases taken from public bug reports (path-traversal CVEs, SSRF bypass
//! lists, IP-encoding tricks, Unicode confusables) are families too
//! ([`reports`]), each case naming its source.
//!
//! Families by guard:
//! - path guard ([`paths`]): `dotdot_climb`, `absolute_outside`,
//!   `absolute_inside`, `symlink_planted`, `trailing_slash_links`,
//!   `control_characters`,
//!   `windows_special_names`, `long_paths`, `no_decoding`, `grant_choice`,
//!   all over the planted tree of [`tree`];
//! - capability grammar ([`capabilities`]): `capability_valid_forms`,
//!   `capability_mutations`, `ip_encodings_in_grants`,
//!   `ipv6_carrying_ipv4_in_grants`, `ports`, `wildcards_and_host_names`,
//!   `wildcard_public_suffixes`, `fs_directories`, `grant_coverage`;
//! - net guard ([`urls`]): `url_ip_spellings`, `url_ipv6_carrying_ipv4`,
//!   `url_resolved_addresses`,
//!   `url_parser_confusion`, `url_schemes`, `url_literal_grants`,
//!   `url_methods_and_headers`, with fixed DNS answers, and checked against
//!   the independent oracle of [`net_oracle`];
//! - arguments ([`args`]): `duplicate_keys`, `json_syntax`,
//!   `nesting_and_size`, `type_confusion`, `extra_fields`, `unicode_values`;
//! - untrusted markers ([`markers`]): `marker_forms`, `marker_confusables`,
//!   `marker_named_classes`, `marker_near_misses`;
//! - reports ([`reports`]): `reports_path_cves`, `reports_ssrf_in_grants`.
//!
//! The corpus is deterministic (no randomness, no network): it is replayed by
//! `tests/tests/hostile_corpus.rs` in the normal test command, directly and
//! through `capsaga check --corpus`. To extend it, add a case to a family or
//! a new family to its module's `families()`; see `docs/security-testing.md`
//! ("The hostile corpus").

pub mod args;
pub mod capabilities;
pub mod markers;
pub mod net_oracle;
pub mod paths;
pub mod reports;
pub mod tree;
pub mod urls;

use capsaga_check::corpus::Case;

/// A named, documented rule producing cases.
#[derive(Debug, Clone)]
pub struct Family {
    /// snake_case name, unique in the corpus.
    pub name: &'static str,
    /// What the family tries and why the expected decisions are right.
    pub doc: &'static str,
    /// The cases (their `family` is set by [`families`]).
    pub cases: Vec<Case>,
}

/// Every family of the corpus, cases tagged with their family's name.
pub fn families() -> Vec<Family> {
    let mut all = Vec::new();
    all.extend(paths::families());
    all.extend(capabilities::families());
    all.extend(urls::families());
    all.extend(args::families());
    all.extend(markers::families());
    all.extend(reports::families());
    for f in &mut all {
        for c in &mut f.cases {
            c.family = Some(f.name.to_string());
        }
    }
    all
}

/// The whole corpus as JSON lines (one case per line), for
/// `capsaga check --corpus`.
pub fn to_jsonl(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        for c in &f.cases {
            out.push_str(&c.to_line());
            out.push('\n');
        }
    }
    out
}
