//! The console's view of information flow (issue 47): a step's label (its
//! integrity, source and the fields labelled apart) from the label the
//! door stored with the step, and what information flow found in a call an
//! approval asks about (argument, value, source step), from
//! `Dispatcher::approval_findings`.

use capsaga_console::{FlowFindingView, StepLabelView};
use capsaga_flow::{Finding, Label, Origin, Source};
use serde_json::Value;

/// The view of a step's stored label; `None` when it has none or it does
/// not parse (written by another version).
pub fn step_label(stored: Option<&Value>) -> Option<StepLabelView> {
    let label: Label = serde_json::from_value(stored?.clone()).ok()?;
    Some(StepLabelView {
        integrity: integrity(&label).to_string(),
        source: label.source.to_string(),
        trusted_fields: label.fields.trusted,
        untrusted_fields: label.fields.untrusted,
    })
}

fn integrity(l: &Label) -> &'static str {
    match l.integrity {
        capsaga_flow::Integrity::Trusted => "trusted",
        capsaga_flow::Integrity::Untrusted => "untrusted",
    }
}

/// The step of `saga` a source is, when it is one of its tool results.
fn step_of(source: &Source, saga: &str) -> Option<u64> {
    match source {
        Source::Tool { saga: s, step, .. } if s == saga => Some(*step),
        _ => None,
    }
}

/// The sources named in words (comma-separated) and the steps of `saga`
/// among them (in order, repeats dropped).
fn named(sources: &[Label], saga: &str) -> (String, Vec<u64>) {
    let mut steps: Vec<u64> = sources
        .iter()
        .filter_map(|l| step_of(&l.source, saga))
        .collect();
    steps.dedup();
    let words: Vec<String> = sources.iter().map(|l| l.source.to_string()).collect();
    (words.join(", "), steps)
}

/// The view of one finding of a call of saga `saga`: the origin of its
/// first token that is not trusted (the one the approval's reason names),
/// else of the value as a whole.
pub fn finding(f: &Finding, saga: &str) -> FlowFindingView {
    let origin = f
        .provenance
        .tokens
        .iter()
        .find(|t| !t.origin.is_trusted())
        .map_or(&f.provenance.origin, |t| &t.origin);
    let (source, steps) = match origin {
        Origin::Untrusted { sources } => {
            let (words, steps) = named(sources, saga);
            (format!("untrusted data: {words}"), steps)
        }
        Origin::Lookalike { of } => (
            format!(
                "nowhere: it imitates, with lookalike characters, a value from {}",
                of.iter()
                    .map(|l| l.source.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Vec::new(),
        ),
        Origin::Nowhere => (
            "nowhere in the user's or operator's text (written after untrusted data was read)"
                .into(),
            Vec::new(),
        ),
        Origin::Output { sources } => {
            let (words, steps) = named(sources, saga);
            (
                format!(
                    "a tool's output ({words}), not the user's, the operator's or an approval's word"
                ),
                steps,
            )
        }
        Origin::Trusted { .. } => ("trusted".into(), Vec::new()),
    };
    FlowFindingView {
        argument: f.argument.clone(),
        value: f.value.clone(),
        level: f.level.as_str().to_string(),
        source,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_label_is_shown_with_its_source_and_fields() {
        let stored = json!({"source": {"kind": "tool", "tool": "calendar", "component": "ab",
            "saga": "s-1", "step": 2}, "integrity": "untrusted",
            "fields": {"trusted": ["/events/*/id"]}});
        let v = step_label(Some(&stored)).unwrap();
        assert_eq!(v.integrity, "untrusted");
        assert_eq!(v.source, "calendar (step 2)");
        assert_eq!(v.trusted_fields, vec!["/events/*/id".to_string()]);
        assert!(step_label(Some(&json!({"integrity": "odd"}))).is_none());
        assert!(step_label(None).is_none());
    }

    #[test]
    fn a_value_only_in_a_tools_output_names_that_output_and_its_step() {
        let listing = Label::trusted(Source::Tool {
            tool: "list_files".into(),
            component: String::new(),
            saga: "s-1".into(),
            step: 1,
        });
        let f = Finding {
            argument: "/file_id".into(),
            value: "13".into(),
            level: capsaga_core::policy::sink::SinkLevel::Endorsed,
            provenance: capsaga_flow::Provenance {
                origin: Origin::Output {
                    sources: vec![listing],
                },
                identifiers: true,
                copied: true,
                tokens: Vec::new(),
            },
        };
        let v = finding(&f, "s-1");
        assert_eq!(v.level, "endorsed");
        assert_eq!(v.steps, vec![1]);
        assert!(
            v.source.starts_with("a tool's output (list_files")
                && v.source.contains("not the user's"),
            "{}",
            v.source
        );
    }
}
