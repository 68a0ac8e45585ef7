//! Effective grants: what a tool requires ∩ what the operator grants
//! (DESIGN §3).
//!
//! Rules:
//! - Every requirement must be covered by at least one operator grant, or the
//!   tool is not callable ([`GrantError::Missing`] lists what is missing).
//!   The one exception is a neuron version the operator approved with a
//!   subset of its request ([`granted_subset`]): what they withheld does
//!   not exist in its sandbox.
//! - Every operator grant must answer some requirement of the tool, or the
//!   policy is refused at load ([`GrantError::Undeclared`]): the operator sees
//!   least privilege, never a grant the tool would silently not use.
//! - The effective grant is the narrower of the two: an `fs:write` grant given
//!   to a tool that only requires `fs:read` becomes `fs:read`; a
//!   `net:https:*.example.com` grant given to a tool that requires
//!   `net:https:api.example.com` becomes the latter.
//! - Operator grants are always concrete; a `*` in a grant is refused.

use crate::capability::{Capability, FsAccess, FsDir, NetTarget, Place, Scheme};
use std::collections::BTreeSet;

/// Why a tool cannot be given its grants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// The operator's policy has no section for the tool: nothing is granted
    /// and the tool is not callable (default deny).
    #[error(
        "tool `{tool}` is not in the operator's policy (add a [tools.{tool}] section to allow it)"
    )]
    NotListed {
        /// The tool's name.
        tool: String,
    },
    /// Requirements of the tool that no operator grant covers.
    #[error("tool `{tool}` is not callable: missing grants {}", list(.missing))]
    Missing {
        /// The tool's name.
        tool: String,
        /// Each uncovered requirement, as written by the tool.
        missing: Vec<String>,
    },
    /// Operator grants the tool did not ask for.
    #[error("policy grants `{tool}` capabilities it does not declare: {}", list(.undeclared))]
    Undeclared {
        /// The tool's name.
        tool: String,
        /// Each grant no requirement asked for.
        undeclared: Vec<String>,
    },
    /// A `*` place in an operator grant.
    #[error("policy for `{tool}`: grant `{grant}` is not concrete (name a directory or host)")]
    NotConcrete {
        /// The tool's name.
        tool: String,
        /// The offending grant.
        grant: String,
    },
}

fn list(v: &[String]) -> String {
    v.join(", ")
}

/// A concrete grant an operator could write for the requirement `required`:
/// the requirement itself when concrete, else an example place of its kind
/// (`fs:write:*` → `fs:write:~/workspace/**`, `net:https:*` →
/// `net:https:api.example.com`).
pub fn example_grant(required: &Capability) -> String {
    match required {
        Capability::Fs {
            access,
            dir: Place::Any,
        } => {
            let a = if *access == FsAccess::Write {
                "write"
            } else {
                "read"
            };
            format!("fs:{a}:~/workspace/**")
        }
        Capability::Net {
            scheme,
            target: Place::Any,
        } => format!("net:{}:api.example.com", scheme.as_str()),
        other => other.to_string(),
    }
}

impl GrantError {
    /// The error for the operator who wrote the policy: what is wrong, what
    /// the tool declares (`declared`, its requirements) and the section to
    /// write, e.g.
    /// ``tool `t` declares fs:write:*; grant it in the policy: [tools.t] grants = ["fs:write:~/workspace/**"]``.
    pub fn for_operator(&self, declared: &[Capability]) -> String {
        let (tool, what) = match self {
            GrantError::NotListed { tool } => (tool, format!("tool `{tool}` is not in the policy")),
            GrantError::Missing { tool, missing } => (
                tool,
                format!(
                    "the policy does not grant `{tool}` what it declares: missing {}",
                    list(missing)
                ),
            ),
            GrantError::Undeclared { tool, undeclared } => (
                tool,
                format!(
                    "the policy grants `{tool}` {} it does not declare (a grant must be of a kind and place the tool declares)",
                    list(undeclared)
                ),
            ),
            GrantError::NotConcrete { tool, .. } => (tool, self.to_string()),
        };
        let declares: Vec<String> = declared.iter().map(ToString::to_string).collect();
        let examples: Vec<String> = declared
            .iter()
            .map(|c| format!("\"{}\"", example_grant(c)))
            .collect();
        if declares.is_empty() {
            format!(
                "{what}; `{tool}` declares no capability: add `[tools.{tool}]` with `grants = []`"
            )
        } else {
            format!(
                "{what}; `{tool}` declares {}: grant it in the policy, e.g.\n  [tools.{tool}]\n  grants = [{}]",
                list(&declares),
                examples.join(", ")
            )
        }
    }
}

/// Whether `granted` (concrete) covers `required` (concrete or `*`), and if so
/// the effective capability (the narrower of the two).
///
/// Directories are compared as already-expanded absolute paths; call with
/// [`FsDir::Absolute`] values (see `Policy::expand`).
pub fn intersect(required: &Capability, granted: &Capability) -> Option<Capability> {
    match (required, granted) {
        (
            Capability::Fs {
                access: ra,
                dir: rd,
            },
            Capability::Fs {
                access: ga,
                dir: Place::Concrete(gd),
            },
        ) => {
            // A read requirement is served by a read or write grant; a write
            // requirement needs a write grant.
            if *ra == FsAccess::Write && *ga == FsAccess::Read {
                return None;
            }
            let access = (*ra).min(*ga);
            let dir = match rd {
                Place::Any => gd.clone(),
                Place::Concrete(r) => narrower_dir(r, gd)?,
            };
            Some(Capability::Fs {
                access,
                dir: Place::Concrete(dir),
            })
        }
        (
            Capability::Net {
                scheme: rs,
                target: rt,
            },
            Capability::Net {
                scheme: gs,
                target: Place::Concrete(gt),
            },
        ) if rs == gs => Some(Capability::Net {
            scheme: *rs,
            target: Place::Concrete(net_target(*rs, rt, gt)?),
        }),
        (Capability::Secret { name: rn, host: rh }, Capability::Secret { name: gn, host: gh })
            if rn == gn && gh.covers(rh) =>
        {
            Some(required.clone())
        }
        // A tool's `llm:*` (or a named tier) is served by a grant of that
        // tier; the effective token cap is the lower of the two.
        (
            Capability::Llm {
                tier: rt,
                max_tokens: rm,
            },
            Capability::Llm {
                tier: Place::Concrete(gt),
                max_tokens: gm,
            },
        ) if matches!(rt, Place::Any) || *rt == Place::Concrete(gt.clone()) => {
            let max_tokens = match (rm, gm) {
                (Some(a), Some(b)) => Some((*a).min(*b)),
                (a, b) => a.or(*b),
            };
            Some(Capability::Llm {
                tier: Place::Concrete(gt.clone()),
                max_tokens,
            })
        }
        // A tool's `mem:*:read` (or a named namespace) is served by a grant
        // of that namespace whose access covers the requirement's; the
        // effective grant is the requirement's access on that namespace.
        (
            Capability::Mem {
                namespace: rn,
                access: ra,
            },
            Capability::Mem {
                namespace: Place::Concrete(gn),
                access: ga,
            },
        ) if ga.covers(*ra) && (matches!(rn, Place::Any) || *rn == Place::Concrete(gn.clone())) => {
            Some(Capability::Mem {
                namespace: Place::Concrete(gn.clone()),
                access: *ra,
            })
        }
        (a, b) if a == b && a.is_concrete() => Some(a.clone()),
        _ => None,
    }
}

/// The target a net grant `granted` (over `scheme`) serves for a tool's
/// `required` one: the required host on the same port, when the grant's
/// host covers it.
fn net_target(
    scheme: Scheme,
    required: &Place<NetTarget>,
    granted: &NetTarget,
) -> Option<NetTarget> {
    match required {
        Place::Any => Some(granted.clone()),
        Place::Concrete(r) => {
            if r.effective_port(scheme) != granted.effective_port(scheme)
                || !granted.host.covers(&r.host)
            {
                return None;
            }
            Some(NetTarget {
                host: r.host.clone(),
                port: r.port.or(granted.port),
            })
        }
    }
}

/// `required` must lie under `granted`; the effective directory is `required`.
fn narrower_dir(required: &FsDir, granted: &FsDir) -> Option<FsDir> {
    let (FsDir::Absolute(r), FsDir::Absolute(g)) = (required, granted) else {
        return (required == granted).then(|| required.clone());
    };
    let under = g == "/"
        || r == g
        || r.strip_prefix(g.as_str())
            .is_some_and(|t| t.starts_with('/'));
    under.then(|| required.clone())
}

/// Compute the effective grants of `tool`.
///
/// `required` is what the tool's meta declares, `granted` what the operator's
/// policy gives it (`~` already expanded). Returns the effective capabilities,
/// sorted and deduplicated.
///
/// # Errors
/// [`GrantError::NotConcrete`] for a `*` grant, [`GrantError::Undeclared`] for
/// a grant no requirement asked for, [`GrantError::Missing`] for requirements
/// left uncovered (checked in that order).
pub fn effective_grants(
    tool: &str,
    required: &[Capability],
    granted: &[Capability],
) -> Result<Vec<Capability>, GrantError> {
    let (effective, withheld) = granted_subset(tool, required, granted)?;
    if !withheld.is_empty() {
        return Err(GrantError::Missing {
            tool: tool.to_string(),
            missing: withheld,
        });
    }
    Ok(effective)
}

/// The effective grants of `tool` when the operator may withhold some of
/// its requirements: a neuron version approved with a subset of what it
/// requested (issue 29). Returns the effective capabilities (sorted,
/// deduplicated, each narrowed as in [`effective_grants`]) and the
/// requirements no grant covers, as the tool wrote them: inside the
/// sandbox those do not exist.
///
/// # Errors
/// [`GrantError::NotConcrete`] for a `*` grant, [`GrantError::Undeclared`]
/// for a grant no requirement asked for: withholding is allowed, widening
/// never.
pub fn granted_subset(
    tool: &str,
    required: &[Capability],
    granted: &[Capability],
) -> Result<(Vec<Capability>, Vec<String>), GrantError> {
    if let Some(g) = granted.iter().find(|g| !g.is_concrete()) {
        return Err(GrantError::NotConcrete {
            tool: tool.to_string(),
            grant: g.to_string(),
        });
    }
    let mut effective = BTreeSet::new();
    let mut undeclared = Vec::new();
    for g in granted {
        let mut used = false;
        for r in required {
            if let Some(e) = intersect(r, g) {
                effective.insert(e);
                used = true;
            }
        }
        if !used {
            undeclared.push(g.to_string());
        }
    }
    if !undeclared.is_empty() {
        return Err(GrantError::Undeclared {
            tool: tool.to_string(),
            undeclared,
        });
    }
    let withheld: Vec<String> = required
        .iter()
        .filter(|r| !granted.iter().any(|g| intersect(r, g).is_some()))
        .map(|r| r.to_string())
        .collect();
    Ok((effective.into_iter().collect(), withheld))
}

/// The grants a dry-run instance gets: `fs:write` narrowed to `fs:read`; the
/// rest unchanged (the net guard limits a dry-run to GET/HEAD itself, and the
/// memory built-ins write nothing in a dry run: they are host code reading
/// the call's dry-run flag).
pub fn dry_run_grants(effective: &[Capability]) -> Vec<Capability> {
    let set: BTreeSet<Capability> = effective
        .iter()
        .map(|c| match c {
            Capability::Fs { dir, .. } => Capability::Fs {
                access: FsAccess::Read,
                dir: dir.clone(),
            },
            other => other.clone(),
        })
        .collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(v: &[&str]) -> Vec<Capability> {
        v.iter().map(|s| Capability::parse(s).unwrap()).collect()
    }
    fn strs(v: &[Capability]) -> Vec<String> {
        v.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn wildcard_requirement_takes_concrete_grant() {
        let e = effective_grants(
            "fs_write",
            &caps(&["fs:write:*"]),
            &caps(&["fs:write:/ws/**"]),
        )
        .unwrap();
        assert_eq!(strs(&e), ["fs:write:/ws/**"]);
    }

    #[test]
    fn write_grant_narrowed_to_read_requirement() {
        let e = effective_grants(
            "fs_read",
            &caps(&["fs:read:*"]),
            &caps(&["fs:write:/ws/**"]),
        )
        .unwrap();
        assert_eq!(strs(&e), ["fs:read:/ws/**"]);
    }

    #[test]
    fn read_grant_does_not_cover_write_requirement() {
        let err = effective_grants(
            "fs_write",
            &caps(&["fs:write:*"]),
            &caps(&["fs:read:/ws/**"]),
        )
        .unwrap_err();
        // The read grant answers no requirement: refused as undeclared.
        assert!(matches!(err, GrantError::Undeclared { .. }), "{err}");
    }

    #[test]
    fn missing_grants_are_listed() {
        let err = effective_grants(
            "t",
            &caps(&["fs:read:*", "net:https:api.x.com"]),
            &caps(&["fs:read:/a/**"]),
        )
        .unwrap_err();
        match err {
            GrantError::Missing { missing, .. } => assert_eq!(missing, ["net:https:api.x.com"]),
            e => panic!("{e}"),
        }
        let err = effective_grants("t", &caps(&["fs:read:*"]), &[]).unwrap_err();
        assert!(err.to_string().contains("fs:read:*"));
    }

    #[test]
    fn a_subset_withholds_what_it_leaves_out_and_never_widens() {
        let required = caps(&[
            "fs:read:/ws/**",
            "fs:write:/ws/out/**",
            "net:https:api.x.com",
        ]);
        // A write grant on /ws answers both file requirements (narrowed
        // to each: read on /ws, write on /ws/out); the network one is
        // withheld.
        let (effective, withheld) =
            granted_subset("t", &required, &caps(&["fs:write:/ws/**"])).unwrap();
        assert_eq!(strs(&effective), ["fs:read:/ws/**", "fs:write:/ws/out/**"]);
        assert_eq!(withheld, ["net:https:api.x.com"]);
        let (effective, withheld) = granted_subset("t", &required, &[]).unwrap();
        assert!(effective.is_empty());
        assert_eq!(withheld.len(), 3);
        // Withholding is allowed; a grant beyond the request or a `*` is not.
        for bad in [
            &["fs:read:/etc/**"][..],
            &["net:https:evil.x.com"],
            &["fs:read:*"],
        ] {
            assert!(
                granted_subset("t", &required, &caps(bad)).is_err(),
                "{bad:?}"
            );
        }
        let sub = caps(&["fs:read:/ws/docs/**"]);
        assert!(
            granted_subset("t", &required, &sub).is_err(),
            "a narrower dir answers no request"
        );
    }

    #[test]
    fn undeclared_and_wildcard_grants_refused() {
        assert!(matches!(
            effective_grants(
                "t",
                &caps(&["fs:read:*"]),
                &caps(&["fs:read:/a/**", "env:HOME"])
            ),
            Err(GrantError::Undeclared { .. })
        ));
        assert!(matches!(
            effective_grants("t", &caps(&["fs:read:*"]), &caps(&["fs:read:*"])),
            Err(GrantError::NotConcrete { .. })
        ));
    }

    #[test]
    fn concrete_dirs_must_nest() {
        let r = caps(&["fs:read:/data/sub/**"]);
        assert_eq!(
            strs(&effective_grants("t", &r, &caps(&["fs:read:/data/**"])).unwrap()),
            ["fs:read:/data/sub/**"]
        );
        assert_eq!(
            strs(&effective_grants("t", &r, &caps(&["fs:read:/**"])).unwrap()),
            ["fs:read:/data/sub/**"]
        );
        assert!(effective_grants("t", &r, &caps(&["fs:read:/data/subway/**"])).is_err());
        assert!(
            effective_grants(
                "t",
                &caps(&["fs:read:/data/**"]),
                &caps(&["fs:read:/data/sub/**"])
            )
            .is_err()
        );
        assert!(
            effective_grants(
                "t",
                &caps(&["fs:read:/dat/**"]),
                &caps(&["fs:read:/data/**"])
            )
            .is_err()
        );
    }

    #[test]
    fn net_hosts_and_ports() {
        let e = effective_grants(
            "t",
            &caps(&["net:https:api.example.com"]),
            &caps(&["net:https:*.example.com"]),
        )
        .unwrap();
        assert_eq!(strs(&e), ["net:https:api.example.com"]);
        assert!(
            effective_grants(
                "t",
                &caps(&["net:https:api.example.com"]),
                &caps(&["net:http:api.example.com"])
            )
            .is_err()
        );
        assert!(
            effective_grants(
                "t",
                &caps(&["net:https:api.example.com:8443"]),
                &caps(&["net:https:api.example.com"])
            )
            .is_err()
        );
        assert!(
            effective_grants(
                "t",
                &caps(&["net:https:api.example.com:443"]),
                &caps(&["net:https:api.example.com"])
            )
            .is_ok()
        );
        let e = effective_grants(
            "t",
            &caps(&["net:http:*"]),
            &caps(&["net:http:127.0.0.1:8080"]),
        )
        .unwrap();
        assert_eq!(strs(&e), ["net:http:127.0.0.1:8080"]);
    }

    #[test]
    fn llm_tiers_and_token_caps() {
        let got = effective_grants(
            "llm",
            &caps(&["llm:*"]),
            &caps(&["llm:cheap:500", "llm:normal"]),
        )
        .unwrap();
        assert_eq!(strs(&got), vec!["llm:cheap:500", "llm:normal"]);
        let got =
            effective_grants("t", &caps(&["llm:cheap:100"]), &caps(&["llm:cheap:500"])).unwrap();
        assert_eq!(strs(&got), vec!["llm:cheap:100"]);
        assert!(effective_grants("t", &caps(&["llm:cheap"]), &caps(&["llm:normal"])).is_err());
        assert!(effective_grants("t", &caps(&["llm:*"]), &caps(&["llm:*"])).is_err());
        assert!(effective_grants("t", &caps(&["llm:*"]), &[]).is_err());
    }

    #[test]
    fn dry_run_strips_write() {
        let d = dry_run_grants(&caps(&["fs:write:/a/**", "fs:read:/a/**", "env:X"]));
        assert_eq!(strs(&d), ["fs:read:/a/**", "env:X"]);
    }

    #[test]
    fn operator_errors_name_the_declaration_and_an_example_grant() {
        let declared = caps(&["fs:write:*"]);
        let e = effective_grants("t", &declared, &caps(&["fs:read:/ws/**"])).unwrap_err();
        let m = e.for_operator(&declared);
        assert!(m.contains("fs:read:/ws/**"), "{m}");
        assert!(m.contains("declares fs:write:*"), "{m}");
        assert!(m.contains("[tools.t]"), "{m}");
        assert!(m.contains("\"fs:write:~/workspace/**\""), "{m}");
        let m = GrantError::NotListed { tool: "p".into() }.for_operator(&[]);
        assert!(m.contains("grants = []"), "{m}");
        assert_eq!(
            example_grant(&caps(&["net:https:*"])[0]),
            "net:https:api.example.com"
        );
    }

    #[test]
    fn mem_grants_cover_requirements() {
        let i = |r: &str, g: &str| {
            intersect(
                &Capability::parse(r).unwrap(),
                &Capability::parse(g).unwrap(),
            )
            .map(|c| c.to_string())
        };
        assert_eq!(
            i("mem:*:read", "mem:default:read").as_deref(),
            Some("mem:default:read")
        );
        assert_eq!(
            i("mem:*:read", "mem:default").as_deref(),
            Some("mem:default:read")
        );
        assert_eq!(i("mem:*:write", "mem:default:read"), None);
        assert_eq!(i("mem:*", "mem:default:read"), None);
        assert_eq!(i("mem:a:read", "mem:b:read"), None);
        assert_eq!(i("mem:a:read", "mem:a:read").as_deref(), Some("mem:a:read"));
    }
}
