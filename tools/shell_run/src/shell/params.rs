//! Parameter expansion: `$name`, the special parameters, and the `${...}`
//! forms (defaults, errors, alternatives, length, pattern removal,
//! substrings, replacement, case changes). Arrays, `${!name}` and `${x@op}`
//! are refused with a clear error.

use brush_parser::word::{
    Parameter, ParameterExpr, ParameterTestType, SpecialParameter, SubstringMatchKind,
};

use super::expand::compile;
use super::io::Io;
use super::{Flow, Shell};

impl Shell {
    /// The value of parameter `p` (`None` when unset).
    pub(super) fn param_value(&self, p: &Parameter) -> Option<String> {
        match p {
            Parameter::Positional(0) => Some("sh".into()),
            Parameter::Positional(n) => self
                .positional
                .get(usize::try_from(*n).ok()?.checked_sub(1)?)
                .cloned(),
            Parameter::Special(s) => match s {
                SpecialParameter::AllPositionalParameters { .. } => Some(self.positional.join(" ")),
                SpecialParameter::PositionalParameterCount => {
                    Some(self.positional.len().to_string())
                }
                SpecialParameter::LastExitStatus => Some(self.last_status.to_string()),
                SpecialParameter::CurrentOptionFlags => Some(if self.errexit {
                    "e".into()
                } else {
                    String::new()
                }),
                SpecialParameter::ProcessId => Some("1".into()),
                SpecialParameter::LastBackgroundProcessId => None,
                SpecialParameter::ShellName => Some("sh".into()),
            },
            Parameter::Named(n) => self.var(n),
            Parameter::NamedWithIndex { name, .. } => self.var(name),
            Parameter::NamedWithAllIndices { name, .. } => self.var(name),
        }
    }

    fn param_name(p: &Parameter) -> String {
        match p {
            Parameter::Positional(n) => n.to_string(),
            Parameter::Special(_) => "special parameter".into(),
            Parameter::Named(n)
            | Parameter::NamedWithIndex { name: n, .. }
            | Parameter::NamedWithAllIndices { name: n, .. } => n.clone(),
        }
    }

    fn unset_or_null(&self, p: &Parameter, t: &ParameterTestType) -> (bool, String) {
        let v = self.param_value(p);
        let missing = match t {
            ParameterTestType::UnsetOrNull => v.as_deref().is_none_or(str::is_empty),
            ParameterTestType::Unset => v.is_none(),
        };
        (missing, v.unwrap_or_default())
    }

    fn opt_single(&mut self, w: Option<&String>, io: &Io) -> Result<String, Flow> {
        match w {
            Some(w) => self.expand_single(w, io),
            None => Ok(String::new()),
        }
    }

    /// Expands `${...}` (and `$name`, `$1`, `$?`...).
    ///
    /// # Errors
    /// [`Flow::Exit`] for a failed `${x?}` or an unsupported form; limits.
    pub(super) fn parameter(&mut self, expr: &ParameterExpr, io: &Io) -> Result<String, Flow> {
        use ParameterExpr as E;
        match expr {
            E::Parameter {
                parameter,
                indirect,
            } => {
                if *indirect {
                    return unsupported(io, "indirect expansion (${!name})");
                }
                Ok(self.param_value(parameter).unwrap_or_default())
            }
            E::UseDefaultValues { .. }
            | E::AssignDefaultValues { .. }
            | E::IndicateErrorIfNullOrUnset { .. }
            | E::UseAlternativeValue { .. } => self.conditional(expr, io),
            E::ParameterLength { parameter, .. } => Ok(self
                .param_value(parameter)
                .unwrap_or_default()
                .chars()
                .count()
                .to_string()),
            E::RemoveSmallestSuffixPattern { .. }
            | E::RemoveLargestSuffixPattern { .. }
            | E::RemoveSmallestPrefixPattern { .. }
            | E::RemoveLargestPrefixPattern { .. } => self.remove_pattern(expr, io),
            E::Substring {
                parameter,
                offset,
                length,
                ..
            } => self.substring(
                parameter,
                &offset.value,
                length.as_ref().map(|l| &l.value),
                io,
            ),
            E::ReplaceSubstring {
                parameter,
                pattern,
                replacement,
                match_kind,
                ..
            } => {
                let v = self.param_value(parameter).unwrap_or_default();
                let pat = self.expand_pattern(pattern, io)?;
                let rep = self.opt_single(replacement.as_ref(), io)?;
                Ok(replace(&v, &pat, &rep, match_kind))
            }
            E::UppercaseFirstChar { parameter, .. }
            | E::UppercasePattern { parameter, .. }
            | E::LowercaseFirstChar { parameter, .. }
            | E::LowercasePattern { parameter, .. } => {
                let v = self.param_value(parameter).unwrap_or_default();
                Ok(change_case(expr, &v))
            }
            E::Transform { .. } => unsupported(io, "${name@op}"),
            E::VariableNames { .. } => unsupported(io, "${!prefix*}"),
            E::MemberKeys { .. } => unsupported(io, "${!name[@]}"),
        }
    }

    /// `${x:-w}`, `${x:=w}`, `${x:?w}`, `${x:+w}` (and without `:`).
    fn conditional(&mut self, expr: &ParameterExpr, io: &Io) -> Result<String, Flow> {
        use ParameterExpr as E;
        match expr {
            E::UseDefaultValues {
                parameter,
                test_type,
                default_value,
                ..
            } => {
                let (missing, v) = self.unset_or_null(parameter, test_type);
                if missing {
                    self.opt_single(default_value.as_ref(), io)
                } else {
                    Ok(v)
                }
            }
            E::AssignDefaultValues {
                parameter,
                test_type,
                default_value,
                ..
            } => {
                let (missing, v) = self.unset_or_null(parameter, test_type);
                if missing {
                    let d = self.opt_single(default_value.as_ref(), io)?;
                    if let Parameter::Named(n) = parameter {
                        self.set_var(n, d.clone());
                    }
                    Ok(d)
                } else {
                    Ok(v)
                }
            }
            E::IndicateErrorIfNullOrUnset {
                parameter,
                test_type,
                error_message,
                ..
            } => {
                let (missing, v) = self.unset_or_null(parameter, test_type);
                if missing {
                    let m = self.opt_single(error_message.as_ref(), io)?;
                    let m = if m.is_empty() {
                        "parameter null or not set".into()
                    } else {
                        m
                    };
                    io.warn(format!("sh: {}: {m}", Self::param_name(parameter)));
                    return Err(Flow::Exit(1));
                }
                Ok(v)
            }
            E::UseAlternativeValue {
                parameter,
                test_type,
                alternative_value,
                ..
            } => {
                let (missing, _) = self.unset_or_null(parameter, test_type);
                if missing {
                    Ok(String::new())
                } else {
                    self.opt_single(alternative_value.as_ref(), io)
                }
            }
            _ => Ok(String::new()),
        }
    }

    /// `${x%p}`, `${x%%p}`, `${x#p}`, `${x##p}`.
    fn remove_pattern(&mut self, expr: &ParameterExpr, io: &Io) -> Result<String, Flow> {
        use ParameterExpr as E;
        let (E::RemoveSmallestSuffixPattern {
            parameter, pattern, ..
        }
        | E::RemoveLargestSuffixPattern {
            parameter, pattern, ..
        }
        | E::RemoveSmallestPrefixPattern {
            parameter, pattern, ..
        }
        | E::RemoveLargestPrefixPattern {
            parameter, pattern, ..
        }) = expr
        else {
            return Ok(String::new());
        };
        let v = self.param_value(parameter).unwrap_or_default();
        let pat = match pattern {
            Some(p) => self.expand_pattern(p, io)?,
            None => return Ok(v),
        };
        let Some(m) = compile(&pat) else { return Ok(v) };
        let cuts: Vec<usize> = v
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(v.len()))
            .collect();
        let r = match expr {
            E::RemoveSmallestSuffixPattern { .. } => cuts
                .iter()
                .rev()
                .find(|&&i| m.is_match(&v[i..]))
                .map(|&i| v[..i].to_owned()),
            E::RemoveLargestSuffixPattern { .. } => cuts
                .iter()
                .find(|&&i| m.is_match(&v[i..]))
                .map(|&i| v[..i].to_owned()),
            E::RemoveSmallestPrefixPattern { .. } => cuts
                .iter()
                .find(|&&i| m.is_match(&v[..i]))
                .map(|&i| v[i..].to_owned()),
            _ => cuts
                .iter()
                .rev()
                .find(|&&i| m.is_match(&v[..i]))
                .map(|&i| v[i..].to_owned()),
        };
        Ok(r.unwrap_or(v))
    }

    /// `${x:offset}` and `${x:offset:length}` (characters; negative counts
    /// from the end).
    fn substring(
        &mut self,
        parameter: &Parameter,
        offset: &str,
        length: Option<&String>,
        io: &Io,
    ) -> Result<String, Flow> {
        let v: Vec<char> = self
            .param_value(parameter)
            .unwrap_or_default()
            .chars()
            .collect();
        let len = i64::try_from(v.len()).unwrap_or(i64::MAX);
        let mut off = self.arith(offset, io)?;
        if off < 0 {
            off = (len + off).max(0);
        }
        let off = off.min(len);
        let end = match length {
            Some(l) => {
                let l = self.arith(l, io)?;
                if l < 0 {
                    (len + l).max(off)
                } else {
                    (off + l).min(len)
                }
            }
            None => len,
        };
        let (a, b) = (
            usize::try_from(off).unwrap_or(0),
            usize::try_from(end).unwrap_or(0),
        );
        Ok(v[a..b.max(a)].iter().collect())
    }
}

fn unsupported(io: &Io, what: &str) -> Result<String, Flow> {
    io.warn(format!("sh: {what} is not supported by shell_run"));
    Err(Flow::Exit(2))
}

/// `${x^}`, `${x^^}`, `${x,}`, `${x,,}`.
fn change_case(expr: &ParameterExpr, v: &str) -> String {
    use ParameterExpr as E;
    let mut c = v.chars();
    match expr {
        E::UppercaseFirstChar { .. } => c
            .next()
            .map_or(String::new(), |f| f.to_uppercase().chain(c).collect()),
        E::LowercaseFirstChar { .. } => c
            .next()
            .map_or(String::new(), |f| f.to_lowercase().chain(c).collect()),
        E::UppercasePattern { .. } => v.to_uppercase(),
        _ => v.to_lowercase(),
    }
}

fn replace(v: &str, pat: &str, rep: &str, kind: &SubstringMatchKind) -> String {
    let Some(m) = compile(pat) else {
        return v.to_owned();
    };
    let idx: Vec<usize> = v
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(v.len()))
        .collect();
    match kind {
        SubstringMatchKind::Prefix => {
            for &j in idx.iter().rev() {
                if m.is_match(&v[..j]) {
                    return format!("{rep}{}", &v[j..]);
                }
            }
            v.to_owned()
        }
        SubstringMatchKind::Suffix => {
            for &i in &idx {
                if m.is_match(&v[i..]) {
                    return format!("{}{rep}", &v[..i]);
                }
            }
            v.to_owned()
        }
        SubstringMatchKind::FirstOccurrence | SubstringMatchKind::Anywhere => {
            let all = matches!(kind, SubstringMatchKind::Anywhere);
            let mut out = String::new();
            let mut k = 0;
            let mut replaced = false;
            while k < idx.len() - 1 {
                let i = idx[k];
                let hit = if replaced && !all {
                    None
                } else {
                    idx[k + 1..]
                        .iter()
                        .rev()
                        .find(|&&j| m.is_match(&v[i..j]))
                        .copied()
                };
                if let Some(j) = hit {
                    out.push_str(rep);
                    replaced = true;
                    k = idx.iter().position(|&x| x == j).unwrap_or(idx.len() - 1);
                } else {
                    let next = idx[k + 1];
                    out.push_str(&v[i..next]);
                    k += 1;
                }
            }
            out
        }
    }
}
