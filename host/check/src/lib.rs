//! Probes of the guards, one input at a time: what `capsaga check` prints and
//! what the hostile corpus and the fuzz targets assert on.
//!
//! Each probe runs the real guard (never a copy of its rules) and returns a
//! [`Verdict`]: the [`Decision`], a stable snake_case `kind` naming the rule
//! that decided (`escapes_root`, `duplicate_key`, `not_granted`, ...), a
//! sentence for a human, and what the guard produced when it let the input
//! through (the resolved path, the effective grant, the canonical arguments,
//! the neutralised text).
//!
//! - [`check_path`]: a path against `fs:` grants, through
//!   [`capsaga_core::path_guard::resolve`] under each granted directory that
//!   contains it (a tool can use any of its preopens).
//! - [`check_url`]: an outgoing request through the net guard
//!   ([`capsaga_net_guard::check_request`] then
//!   [`capsaga_net_guard::vet_addresses`] on the resolver's answer).
//! - [`check_capability`]: a capability string through the grammar of
//!   [`capsaga_core::capability`]; with grants, as a tool's requirement through
//!   [`capsaga_core::grant::intersect`].
//! - [`check_args`]: JSON arguments against a JSON Schema through
//!   [`capsaga_core::validate::ArgsValidator`] (strict JSON, duplicate keys refused).
//! - [`check_untrusted`]: content through [`capsaga_untrusted::wrap`]; the
//!   verdict says whether marker-like text was neutralised, and reports a
//!   guard failure ([`Decision::Escaped`]) if the wrapped text does not hold
//!   exactly one real opening and one closing marker.
//!
//! [`corpus`] reads and replays corpus files of such probes with their
//! expected decisions (JSON lines).

pub mod corpus;

use capsaga_core::capability::{Capability, FsAccess, FsDir, Place};
use capsaga_core::grant::intersect;
use capsaga_core::json::canonical;
use capsaga_core::path_guard::{Follow, FsView, candidate_roots, resolve};
use capsaga_core::validate::{ArgsValidator, CallError};
use capsaga_net_guard::{DestHost, NetDenied, NetRequest, check_request, vet_addresses};
use capsaga_untrusted::{contains_marker_like, count_markers, inner, wrap_counted};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Which guard a probe exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    /// The path guard under `fs:` grants.
    Path,
    /// The net guard under `net:` grants.
    Url,
    /// The capability-string grammar (and grant coverage).
    Capability,
    /// Tool-call arguments against a JSON Schema.
    Args,
    /// The `<untrusted>` markers around content from outside.
    Untrusted,
}

impl Guard {
    /// The name used on the command line and in corpus files.
    pub fn as_str(self) -> &'static str {
        match self {
            Guard::Path => "path",
            Guard::Url => "url",
            Guard::Capability => "capability",
            Guard::Args => "args",
            Guard::Untrusted => "untrusted",
        }
    }
}

/// What the guard decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The input passes (path, url, capability, args).
    Allow,
    /// The input is refused (path, url, capability, args).
    Deny,
    /// Marker-like text in the content was neutralised (untrusted).
    Neutralised,
    /// The content holds nothing marker-like and is wrapped unchanged
    /// (untrusted).
    Unchanged,
    /// The guard failed: wrapped content could close or forge a marker. Never
    /// an expected outcome; a corpus or fuzz run that sees it has found a bug.
    Escaped,
}

impl Decision {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Neutralised => "neutralised",
            Decision::Unchanged => "unchanged",
            Decision::Escaped => "escaped",
        }
    }
}

/// The result of one probe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The guard probed.
    pub guard: Guard,
    /// Its decision.
    pub decision: Decision,
    /// Stable snake_case name of the rule that decided.
    pub kind: String,
    /// One or more sentences for a human.
    pub reason: String,
    /// What the guard produced when it let the input through (resolved path,
    /// effective grants, canonical arguments, neutralised text), if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

impl Verdict {
    fn new(guard: Guard, decision: Decision, kind: &str, reason: impl Into<String>) -> Verdict {
        Verdict {
            guard,
            decision,
            kind: kind.to_string(),
            reason: reason.into(),
            value: None,
        }
    }

    fn with(mut self, value: Value) -> Verdict {
        self.value = Some(value);
        self
    }
}

/// A path probe.
#[derive(Debug, Clone, Copy)]
pub struct PathProbe<'a> {
    /// The path as the model, the guest or the operator wrote it.
    pub path: &'a str,
    /// The grants (`~` already expanded); only concrete `fs:` grants count.
    pub grants: &'a [Capability],
    /// The caller wants to write (needs an `fs:write` grant).
    pub write: bool,
    /// Follow a symlink in the final component.
    pub follow: Follow,
}

/// Check a path against `fs:` grants, from the attacker's side.
///
/// The same implementation as the tools' (`capsaga-path-guard`, which the
/// SDK's `fs::resolve` runs in the guest). A tool holds every granted
/// directory as its own preopen and can address any of them directly (raw
/// WASI calls, not only wasi-libc's choice of the longest prefix), so an
/// absolute path is allowed when *some* granted directory it literally
/// starts with resolves it ([`resolve`]) with enough access: a read-only
/// grant nested in a writable one does not make its subtree read-only. A
/// relative path is resolved under the only granted directory (refused as
/// ambiguous when there are several), as the tools resolve it. When no
/// grant allows it, the refusal reported is the one of the most specific
/// granted directory (`read_only` when the path resolved but only under
/// read grants).
pub fn check_path(probe: &PathProbe<'_>, fs: &impl FsView) -> Verdict {
    let g = Guard::Path;
    let roots: Vec<(&str, FsAccess, &Capability)> = probe
        .grants
        .iter()
        .filter_map(|c| match c {
            Capability::Fs {
                access,
                dir: Place::Concrete(FsDir::Absolute(d)),
            } => Some((d.as_str(), *access, c)),
            _ => None,
        })
        .collect();
    if roots.is_empty() {
        return Verdict::new(
            g,
            Decision::Deny,
            "no_grant",
            "no fs grant: every path is denied",
        );
    }
    // Which granted directories to try, in order: the shared rule of the
    // path guard (an absolute path under each directory it literally starts
    // with, most specific first; a relative one under the only directory).
    // A directory granted twice (read and write) is one directory.
    let mut names: Vec<&str> = roots.iter().map(|(r, _, _)| *r).collect();
    names.sort_unstable();
    names.dedup();
    let order = match candidate_roots(&names, probe.path) {
        Ok(order) => order,
        Err(e) => return Verdict::new(g, Decision::Deny, e.kind(), e.to_string()),
    };
    let roots: Vec<(&str, FsAccess, &Capability)> = order
        .into_iter()
        .flat_map(|i| {
            let name = names[i];
            roots.iter().filter(move |(r, _, _)| *r == name).copied()
        })
        .collect();
    let mut first_refusal: Option<Verdict> = None;
    let mut read_only: Option<&Capability> = None;
    for (root, access, grant) in &roots {
        match resolve(std::path::Path::new(root), probe.path, probe.follow, fs) {
            Ok(_) if probe.write && *access == FsAccess::Read => {
                read_only.get_or_insert(grant);
            }
            Ok(p) => {
                let resolved = p.to_string_lossy().into_owned();
                return Verdict::new(
                    g,
                    Decision::Allow,
                    "allowed",
                    format!("resolves to `{resolved}` under {grant}"),
                )
                .with(json!({ "resolved": resolved, "grant": grant.to_string() }));
            }
            Err(e) => {
                first_refusal.get_or_insert_with(|| {
                    Verdict::new(g, Decision::Deny, e.kind(), e.to_string())
                        .with(json!({ "grant": grant.to_string() }))
                });
            }
        }
    }
    match (read_only, first_refusal) {
        (Some(grant), _) => Verdict::new(
            g,
            Decision::Deny,
            "read_only",
            format!("the path is only granted read-only ({grant}): writing is denied"),
        )
        .with(json!({ "grant": grant.to_string() })),
        (None, Some(v)) => v,
        (None, None) => Verdict::new(g, Decision::Deny, "no_grant", "no grant resolves the path"),
    }
}

/// The stable rule name of a net guard refusal.
pub fn net_kind(e: &NetDenied) -> &'static str {
    match e {
        NetDenied::NoGrant => "no_grant",
        NetDenied::BadUrl { .. } => "bad_url",
        NetDenied::HostSpelling { .. } => "host_spelling",
        NetDenied::Scheme { .. } => "scheme",
        NetDenied::Userinfo { .. } => "userinfo",
        NetDenied::Header { .. } => "header",
        NetDenied::Method { .. } => "method",
        NetDenied::NotGranted { .. } => "not_granted",
        NetDenied::Address { .. } => "address",
        NetDenied::NotUnicast { .. } => "not_unicast",
        NetDenied::NoAddress { .. } => "no_address",
    }
}

/// Check an outgoing request against `net:` grants. `resolve` answers the
/// DNS question for a name (an empty answer is "does not resolve"); it is
/// not asked for IP literals.
pub fn check_url(
    req: &NetRequest<'_>,
    grants: &[Capability],
    resolve: &dyn Fn(&str) -> Vec<std::net::IpAddr>,
) -> Verdict {
    let g = Guard::Url;
    let deny = |e: NetDenied| Verdict::new(g, Decision::Deny, net_kind(&e), e.to_string());
    let dest = match check_request(req, grants) {
        Ok(d) => d,
        Err(e) => return deny(e),
    };
    let resolved = match &dest.host {
        DestHost::Domain(name) => resolve(name),
        DestHost::Ip(_) => Vec::new(),
    };
    match vet_addresses(&dest, &resolved) {
        Err(e) => deny(e),
        Ok(addrs) => {
            let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            Verdict::new(
                g,
                Decision::Allow,
                "allowed",
                format!(
                    "{} {} may connect to {}",
                    req.method,
                    dest.url,
                    list.join(", ")
                ),
            )
            .with(json!({
                "url": dest.url,
                "host": dest.host.to_string(),
                "port": dest.port,
                "host_header": dest.host_header,
                "addresses": list,
            }))
        }
    }
}

/// Check a capability string. Without grants: does it parse, and to what.
/// With grants (`~` expanded): as a tool's requirement, which effective
/// grants would the tool receive ([`capsaga_core::grant::intersect`]).
pub fn check_capability(input: &str, grants: &[Capability]) -> Verdict {
    let g = Guard::Capability;
    let cap = match Capability::parse(input) {
        Ok(c) => c,
        Err(e) => return Verdict::new(g, Decision::Deny, "invalid_capability", e.reason),
    };
    let printed = cap.to_string();
    let parsed = json!({
        "normalised": printed,
        "kind": cap.kind(),
        "concrete": cap.is_concrete(),
    });
    if grants.is_empty() {
        return Verdict::new(
            g,
            Decision::Allow,
            "valid",
            format!("valid {} capability, normalised `{printed}`", cap.kind()),
        )
        .with(parsed);
    }
    let effective: Vec<String> = grants
        .iter()
        .filter_map(|gr| intersect(&cap, gr))
        .map(|c| c.to_string())
        .collect();
    if effective.is_empty() {
        let list: Vec<String> = grants.iter().map(|c| c.to_string()).collect();
        Verdict::new(
            g,
            Decision::Deny,
            "not_granted",
            format!(
                "`{printed}` is not covered by any grant ({})",
                list.join(", ")
            ),
        )
        .with(parsed)
    } else {
        Verdict::new(
            g,
            Decision::Allow,
            "covered",
            format!("`{printed}` is covered: effective {}", effective.join(", ")),
        )
        .with(json!({ "normalised": printed, "effective": effective }))
    }
}

/// Check JSON arguments (text, as the model wrote them) against an args
/// schema. A schema the registry would refuse gives a `deny` of kind
/// `invalid_schema`.
pub fn check_args(schema: &Value, args: &str) -> Verdict {
    check_args_of("check", schema, args)
}

/// [`check_args`] for the tool named `tool`: the reason names it, as the
/// model's error message would (`capsaga check args --tool NAME`).
pub fn check_args_of(tool: &str, schema: &Value, args: &str) -> Verdict {
    let g = Guard::Args;
    let validator = match ArgsValidator::new(tool, schema) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::new(
                g,
                Decision::Deny,
                "invalid_schema",
                format!("the schema is not usable: {e}"),
            );
        }
    };
    match validator.check_text(args) {
        Ok(v) => Verdict::new(
            g,
            Decision::Allow,
            "valid",
            "the arguments match the schema",
        )
        .with(Value::String(canonical(&v))),
        Err(e) => {
            let kind = match &e {
                CallError::NotJson { error, .. } => error.kind(),
                CallError::Schema { .. } => "schema",
                CallError::UnknownTool { .. } => "unknown_tool",
            };
            let problems = match &e {
                CallError::Schema { problems, .. } => serde_json::to_value(problems).ok(),
                _ => None,
            };
            let v = Verdict::new(g, Decision::Deny, kind, e.to_model_message());
            match problems {
                Some(p) => v.with(p),
                None => v,
            }
        }
    }
}

/// Wrap `content` in untrusted markers and report what happened to it. The
/// verdict is [`Decision::Escaped`] (a guard failure) when the wrapped text
/// does not hold exactly one real opening and one closing marker, or when its
/// inside still reads as a marker.
pub fn check_untrusted(content: &str) -> Verdict {
    let g = Guard::Untrusted;
    let (wrapped, n) = wrap_counted("tool:check", "1970-01-01T00:00:00Z", content);
    let body = inner(&wrapped).unwrap_or("");
    if count_markers(&wrapped) != (1, 1) || contains_marker_like(body) {
        return Verdict::new(
            g,
            Decision::Escaped,
            "marker_escape",
            "the wrapped content holds a marker: the untrusted wrapper failed",
        )
        .with(Value::String(wrapped));
    }
    if n == 0 {
        Verdict::new(
            g,
            Decision::Unchanged,
            "unchanged",
            "nothing marker-like: wrapped unchanged",
        )
        .with(Value::String(wrapped))
    } else {
        Verdict::new(
            g,
            Decision::Neutralised,
            "neutralised",
            format!("{n} marker-like sequence(s) neutralised"),
        )
        .with(Value::String(wrapped))
    }
}

#[cfg(test)]
mod tests;
