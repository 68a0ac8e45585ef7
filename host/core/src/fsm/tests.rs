use super::*;
use proptest::prelude::*;

#[test]
fn happy_path() {
    let g = Guardrail::new();
    let mut s = State::Idle;
    for e in [
        Event::StartSaga,
        Event::PlanReady { steps: 2 },
        Event::ToolSucceeded { validate: false },
        Event::ToolSucceeded { validate: true },
        Event::ValidationPassed { complete: true },
    ] {
        s = g.apply(s, e).unwrap();
    }
    assert_eq!(s, State::Done);
}

#[test]
fn failure_path() {
    let g = Guardrail::new();
    let s = g.apply(State::Acting, Event::ToolFailed).unwrap();
    assert_eq!(s, State::Compensating);
    assert_eq!(
        g.apply(s, Event::CompensationDone).unwrap(),
        State::FailedRolledBack
    );
    assert_eq!(
        g.apply(s, Event::CompensationFailed).unwrap(),
        State::FailedRollbackPartial
    );
}

#[test]
fn approval_path() {
    let g = Guardrail::new();
    for from in [State::Planning, State::Acting, State::Validating] {
        let parked = g.apply(from, Event::ApprovalRequested).unwrap();
        assert_eq!(parked, State::AwaitingApproval);
        assert_eq!(
            g.apply(parked, Event::ApprovalGranted).unwrap(),
            State::Acting
        );
        assert_eq!(
            g.apply(parked, Event::ApprovalDenied).unwrap(),
            State::Compensating
        );
        // Parked: nothing executes, and no other event moves the saga.
        assert!(g.may_execute(parked, false).is_err());
        assert!(g.may_execute(parked, true).is_err());
        for e in [
            Event::PlanReady { steps: 1 },
            Event::ToolSucceeded { validate: false },
            Event::ValidationPassed { complete: true },
            Event::Finish,
            Event::CompensationDone,
            Event::ApprovalRequested,
        ] {
            assert!(g.apply(parked, e).is_err(), "{e:?}");
        }
    }
    // Granting or denying needs a parked saga.
    for s in [State::Planning, State::Acting, State::Validating] {
        assert!(g.apply(s, Event::ApprovalGranted).is_err());
        assert!(g.apply(s, Event::ApprovalDenied).is_err());
    }
    assert!(
        g.apply(State::Compensating, Event::ApprovalRequested)
            .is_err()
    );
}

#[test]
fn default_deny_and_terminal() {
    let g = Guardrail::new();
    assert!(g.apply(State::Idle, Event::ToolFailed).is_err());
    assert!(
        g.apply(State::Planning, Event::PlanReady { steps: 0 })
            .is_err()
    );
    for t in [
        State::Done,
        State::FailedRolledBack,
        State::FailedRollbackPartial,
    ] {
        for e in [
            Event::StartSaga,
            Event::ToolFailed,
            Event::CompensationDone,
            Event::Finish,
            Event::Abort,
            Event::ApprovalRequested,
            Event::ApprovalGranted,
        ] {
            assert!(g.apply(t, e).is_err());
        }
    }
}

#[test]
fn operator_row_is_closed() {
    let g = Guardrail::new();
    let ok = OperatorEvent::CompensationRetried {
        all_compensated: true,
    };
    let still = OperatorEvent::CompensationRetried {
        all_compensated: false,
    };
    assert_eq!(
        g.apply_operator(State::FailedRollbackPartial, ok).unwrap(),
        State::FailedRolledBack
    );
    let denied = g
        .apply_operator(State::FailedRollbackPartial, still)
        .unwrap_err();
    assert!(denied.reason.is_some());
    for s in State::ALL
        .into_iter()
        .filter(|s| *s != State::FailedRollbackPartial)
    {
        assert!(g.apply_operator(s, ok).is_err(), "{s}");
    }
    // Undo: only a Done saga, into Compensating.
    for s in State::ALL {
        let r = g.apply_operator(s, OperatorEvent::Undo);
        if s == State::Done {
            assert_eq!(r, Ok(State::Compensating));
        } else {
            assert!(r.is_err(), "{s}");
        }
    }
    // No event of the saga engine leaves FailedRollbackPartial.
    assert!(
        g.rows()
            .iter()
            .filter(|r| r.from == State::FailedRollbackPartial)
            .all(|r| r.source == "operator")
    );
}

#[test]
fn execute_rules() {
    let g = Guardrail::new();
    assert!(g.may_execute(State::Planning, false).is_ok());
    assert!(g.may_execute(State::Planning, true).is_err());
    assert!(g.may_execute(State::Validating, true).is_err());
    assert!(g.may_execute(State::Acting, true).is_ok());
    assert!(g.may_execute(State::Compensating, false).is_err());
    assert!(g.may_execute(State::AwaitingApproval, false).is_err());
    assert!(g.may_execute(State::Done, false).is_err());
}

fn row(from: State, event: &str, to: State) -> ExtraTransition {
    ExtraTransition {
        from,
        event: event.into(),
        to,
    }
}

#[test]
fn extra_rows_validated() {
    let refused = [
        row(State::Done, "StartSaga", State::Planning),
        row(State::FailedRollbackPartial, "Abort", State::Compensating),
        row(State::Acting, "Finish", State::Done),
        row(State::Acting, "Bogus", State::Validating),
        row(State::Acting, "ToolFailed", State::FailedRolledBack),
        // Overriding a row of the table, or its guard.
        row(State::Planning, "PlanReady", State::Validating),
        row(State::Acting, "ToolFailed", State::Validating),
        // Approvals.
        row(State::AwaitingApproval, "Finish", State::Done),
        row(State::AwaitingApproval, "PlanReady", State::Acting),
        row(State::Acting, "ToolSucceeded", State::AwaitingApproval),
        row(State::Compensating, "ApprovalGranted", State::Acting),
        row(State::Planning, "ApprovalGranted", State::Acting),
        // Interrupting a rollback.
        row(State::Compensating, "ToolSucceeded", State::Acting),
        row(State::Acting, "Abort", State::Idle),
    ];
    for r in refused {
        assert!(Guardrail::with_extra(vec![r.clone()]).is_err(), "{r:?}");
    }
    let g = Guardrail::with_extra(vec![row(
        State::Validating,
        "ToolFailed",
        State::Compensating,
    )])
    .unwrap();
    assert_eq!(
        g.apply(State::Validating, Event::ToolFailed).unwrap(),
        State::Compensating
    );
    // A table row whose guard fails stays denied even with extras.
    let g = Guardrail::with_extra(vec![row(
        State::Planning,
        "ToolFailed",
        State::Compensating,
    )])
    .unwrap();
    assert!(
        g.apply(State::Planning, Event::PlanReady { steps: 0 })
            .is_err()
    );
}

#[test]
fn fsm_toml_parses_and_refuses() {
    let g = FsmFile::parse(
        "[[transition]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n",
    )
    .unwrap();
    assert_eq!(g.extra().len(), 1);
    assert!(g.rows().iter().any(|r| r.source == "fsm.toml"));
    assert_eq!(FsmFile::parse("").unwrap().extra().len(), 0);
    for bad in [
        "[[transition]]\nfrom = \"Nowhere\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n",
        "[[transition]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\nguard = \"x\"\n",
        "[[transitions]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n",
        "[[transition]]\nfrom = \"Done\"\nevent = \"StartSaga\"\nto = \"Planning\"\n",
        "[[transition]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n[[transition]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n",
    ] {
        assert!(FsmFile::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn states_round_trip_names() {
    for s in State::ALL {
        assert_eq!(s.as_str().parse::<State>().unwrap(), s);
    }
    assert!("acting".parse::<State>().is_err());
}

#[test]
fn mermaid_lists_every_row() {
    let g = Guardrail::new();
    let m = g.mermaid();
    assert!(m.starts_with("stateDiagram-v2\n"));
    assert!(m.contains("AwaitingApproval --> Acting: ApprovalGranted"));
    assert!(m.contains(
        "FailedRollbackPartial --> FailedRolledBack: OperatorCompensationRetried (operator)"
    ));
    assert_eq!(m.matches(" --> ").count(), g.rows().len() + 1 + 3);
}

pub(super) fn any_state() -> impl Strategy<Value = State> {
    prop::sample::select(State::ALL.to_vec())
}

pub(super) fn any_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::StartSaga),
        (0usize..3).prop_map(|steps| Event::PlanReady { steps }),
        any::<bool>().prop_map(|validate| Event::ToolSucceeded { validate }),
        Just(Event::ToolFailed),
        any::<bool>().prop_map(|complete| Event::ValidationPassed { complete }),
        Just(Event::ValidationFailed),
        Just(Event::CompensationDone),
        Just(Event::CompensationFailed),
        Just(Event::Finish),
        Just(Event::Abort),
        Just(Event::ApprovalRequested),
        Just(Event::ApprovalGranted),
        Just(Event::ApprovalDenied),
        Just(Event::CallDeclined),
    ]
}

fn any_extra() -> impl Strategy<Value = ExtraTransition> {
    (
        any_state(),
        prop::sample::select(EVENT_NAMES.to_vec()),
        any_state(),
    )
        .prop_map(|(from, event, to)| ExtraTransition {
            from,
            event: event.to_string(),
            to,
        })
}

/// The guard data of `event` is consistent with the row's target.
fn guard_holds(from: State, event: Event, to: State) -> bool {
    match event {
        Event::PlanReady { steps } => steps > 0,
        Event::ToolSucceeded { validate } if from == State::Acting => {
            to == if validate {
                State::Validating
            } else {
                State::Acting
            }
        }
        Event::ValidationPassed { complete } if from == State::Validating => {
            to == if complete { State::Done } else { State::Acting }
        }
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// Thousands of random event sequences, from random states, with random
    /// extra rows (only those `with_extra` accepts): no panic, and every
    /// applied transition is a row of the table (or an accepted extra row)
    /// whose guard holds; a denied event leaves the state unchanged; a
    /// terminal state is never left; AwaitingApproval is entered only by
    /// ApprovalRequested and left only by a human's decision; execute is
    /// allowed only where SPEC §3.5 allows it.
    #[test]
    fn random_sequences_apply_only_table_rows(
        start in prop_oneof![Just(State::Idle), any_state()],
        events in prop::collection::vec(any_event(), 0..64),
        extras in prop::collection::vec(any_extra(), 0..6),
    ) {
        let accepted: Vec<ExtraTransition> = extras
            .into_iter()
            .filter(|t| Guardrail::with_extra(vec![t.clone()]).is_ok())
            .fold(Vec::new(), |mut acc, t| {
                if !acc.iter().any(|a: &ExtraTransition| a.from == t.from && a.event == t.event) {
                    acc.push(t);
                }
                acc
            });
        let g = Guardrail::with_extra(accepted).unwrap();
        let rows = g.rows();
        let mut s = start;
        for e in events {
            for side_effects in [false, true] {
                let allowed = g.may_execute(s, side_effects).is_ok();
                let expected = s == State::Acting
                    || (matches!(s, State::Planning | State::Validating) && !side_effects);
                prop_assert_eq!(allowed, expected, "may_execute({}, {})", s, side_effects);
            }
            match g.apply(s, e) {
                Ok(to) => {
                    prop_assert!(
                        rows.iter().any(|r| r.from == s && r.event == e.name() && r.to == to && r.source != "operator"),
                        "{} --{}--> {} is not a row", s, e.name(), to
                    );
                    prop_assert!(!s.is_terminal(), "left terminal state {}", s);
                    // Guards belong to the table's rows (extra rows have none).
                    if Guardrail::in_table(s, e.name()) {
                        prop_assert!(guard_holds(s, e, to), "guard of {:?} in {}", e, s);
                    }
                    if to == State::AwaitingApproval {
                        prop_assert_eq!(e, Event::ApprovalRequested);
                    }
                    if s == State::AwaitingApproval {
                        prop_assert!(matches!(e, Event::ApprovalGranted | Event::ApprovalDenied | Event::CallDeclined));
                    }
                    if s == State::Compensating {
                        prop_assert!(matches!(e, Event::CompensationDone | Event::CompensationFailed));
                    }
                    s = to;
                }
                Err(denied) => {
                    prop_assert_eq!(denied.from, s);
                    prop_assert_eq!(denied.event, e.name());
                }
            }
        }
    }
}
