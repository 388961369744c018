//! Unit tests of [`super`]: parsing, messages, matching and `LabelSelector` conversion.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use proptest::prelude::*;

fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn msg(s: &str) -> String {
    Selector::parse(s)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

fn expr(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: values.map(|vs| vs.iter().map(|v| v.to_string()).collect()),
    }
}

fn expressions(exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(exprs),
    }
}

fn as_selector_err(ls: &LabelSelector) -> String {
    from_label_selector(ls)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn parse_and_match_table() {
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
    let rows: &[Row] = &[
        ("", &[], true),
        ("app=foo", &[("app", "foo")], true),
        ("app==foo", &[("app", "bar")], false),
        ("app!=foo", &[], true),
        ("app!=foo", &[("app", "foo")], false),
        ("app in (foo,bar),!missing", &[("app", "bar")], true),
        (
            "app in (foo, bar) , !missing",
            &[("app", "bar"), ("missing", "x")],
            false,
        ),
        ("app notin (foo)", &[], true),
        ("app", &[("app", "")], true),
        ("!app", &[("app", "")], false),
        ("n>5", &[("n", "6")], true),
        ("n<5", &[("n", "6")], false),
        ("n>5", &[("n", "x")], false),
        ("env=", &[("env", "")], true),
        ("example.com/x=y", &[("example.com/x", "y")], true),
        // From the client's lister selector tests.
        (
            "app=web, tier in (fe, be), !legacy, env!=prod",
            &[("app", "web"), ("tier", "fe")],
            true,
        ),
        (
            "app=web, tier in (fe, be), !legacy, env!=prod",
            &[("app", "web"), ("tier", "db")],
            false,
        ),
        (
            "app=web, tier in (fe, be), !legacy, env!=prod",
            &[("app", "web"), ("tier", "fe"), ("legacy", "")],
            false,
        ),
        (
            "app=web, tier in (fe, be), !legacy, env!=prod",
            &[("app", "web"), ("tier", "fe"), ("env", "prod")],
            false,
        ),
        ("x", &[("x", "1")], true),
    ];
    for (sel, labels, want) in rows {
        let s = Selector::parse(sel);
        assert!(s.is_ok(), "{sel}: {s:?}");
        let s = s.unwrap_or_default();
        assert_eq!(s.matches(&l(labels)), *want, "{sel} on {labels:?}");
    }
}

#[test]
fn parse_errors() {
    for bad in [
        "app in (foo",
        "=foo",
        "app in foo",
        "app=foo,",
        "!app=x",
        "Bad Key=1",
        "a=b=c",
        "a=-x-",
        "a b",
        "x in (a,,)",
    ] {
        assert!(Selector::parse(bad).is_err(), "{bad} should fail");
    }
}

#[test]
fn error_messages_follow_apimachinery() {
    assert_eq!(
        msg("app in (foo"),
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    assert_eq!(msg("a=b,"), "found '', expected: identifier after ','");
    assert_eq!(
        msg("Bad Key=1"),
        "unable to parse requirement: found 'Key', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        msg("app in foo"),
        "unable to parse requirement: found 'foo' expected: '('"
    );
    assert_eq!(
        msg("x in (a b)"),
        "unable to parse requirement: found 'b', expected: ',' or ')'"
    );
    assert_eq!(
        msg("x in (a,=)"),
        "unable to parse requirement: found '=', expected: ',', or identifier"
    );
    assert_eq!(
        msg("x in =)"),
        "unable to parse requirement: found '=' expected: '('"
    );
    assert_eq!(
        msg("x in (=)"),
        "unable to parse requirement: found '=', expected: ',', ')' or identifier"
    );
    assert_eq!(
        msg("x=("),
        "unable to parse requirement: found '(', expected: identifier"
    );
    assert_eq!(
        msg("a=-x-"),
        format!(
            "unable to parse requirement: values[0][a]: Invalid value: \"-x-\": {}",
            is_valid_label_value("-x-").join("; ")
        )
    );
}

/// Regression: a key that is not a qualified name is reported at the parser's nil field path,
/// which apimachinery prints as `<nil>` (this said `key:`).
#[test]
fn bad_key_in_selector_string_is_reported_at_nil_path() {
    assert!(
        msg("-a=1").starts_with("unable to parse requirement: <nil>: Invalid value: \"-a\""),
        "{}",
        msg("-a=1")
    );
    assert!(msg("!-a").starts_with("unable to parse requirement: <nil>: Invalid value: \"-a\""));
}

/// Regression: `()` is the set holding the empty string, as upstream parses it (this was an
/// error), so `x in ()` matches an empty `x` and `x notin ()` every object without one.
#[test]
fn empty_value_set_is_the_empty_string() {
    let s = Selector::parse("x in ()");
    assert_eq!(
        s.as_ref().map(|s| s.requirements()[0].values.clone()),
        Ok(vec![String::new()])
    );
    assert!(s.as_ref().is_ok_and(|s| s.matches(&l(&[("x", "")]))));
    assert!(s.as_ref().is_ok_and(|s| !s.matches(&l(&[("x", "a")]))));
    assert_eq!(s.map(|s| s.to_string()), Ok("x in ()".to_string()));
    assert!(Selector::parse("x notin ()").is_ok_and(|s| s.matches(&l(&[("x", "a")]))));
    // Empty elements in a list are the empty string too.
    assert_eq!(
        Selector::parse("x in (a,,b)").map(|s| s.requirements()[0].values.clone()),
        Ok(vec![String::new(), "a".to_string(), "b".to_string()])
    );
}

/// Regression: where a key may start, `in` and `notin` are identifiers (they were operators
/// only, so `in=a` and `a=b,in` failed).
#[test]
fn in_and_notin_are_keys_where_a_key_is_expected() {
    assert!(Selector::parse("in=a").is_ok_and(|s| s.matches(&l(&[("in", "a")]))));
    assert!(Selector::parse("a=b,notin").is_ok_and(|s| s.matches(&l(&[("a", "b"), ("notin", "")]))));
    assert!(Selector::parse("in in (notin)").is_ok_and(|s| s.matches(&l(&[("in", "notin")]))));
}

/// Regression: a bad first token and what follows a `!key` are selector-level errors without
/// the requirement prefix, as upstream reports them.
#[test]
fn selector_level_errors_carry_no_requirement_prefix() {
    assert_eq!(
        msg("=foo"),
        "found '=', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(msg("!app=x"), "found '=', expected: ',' or 'end of string'");
    assert_eq!(msg("a=b=c"), "found '=', expected: ',' or 'end of string'");
}

/// Regression: `NewRequirement` reports every failed check (aggregated), quotes the bad value
/// and indexes the value it is about (this kept the first error, without the value, at
/// `values[0]`).
#[test]
fn requirement_errors_are_aggregated_and_indexed() {
    let label_msg = is_valid_label_value("-x").join("; ");
    assert_eq!(
        msg("n>-x"),
        format!(
            "unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt', 'Lt' operators, \
             the value must be an integer, values[0][n]: Invalid value: \"-x\": {label_msg}]"
        )
    );
    assert_eq!(
        msg("x in (a,z-)"),
        format!(
            "unable to parse requirement: values[1][x]: Invalid value: \"z-\": {}",
            is_valid_label_value("z-").join("; ")
        )
    );
    let both = Requirement::new("-k", Operator::Exists, vec!["<a>".into()])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(both.starts_with("[key: Invalid value: \"-k\": "), "{both}");
    assert!(
        both.contains(", values: Invalid value: [\"\\u003ca\\u003e\"]: values set must be empty for exists and does not exist, values[0][-k]: "),
        "{both}"
    );
}

#[test]
fn display_is_canonical() {
    let s = Selector::parse("z=1, a in (y,x), !b").unwrap_or_default();
    assert_eq!(s.to_string(), "a in (x,y),!b,z=1");
    assert_eq!(Selector::nothing().to_string(), "");
}

#[test]
fn from_metav1_selector() {
    let ls: LabelSelector = serde_json::from_value(serde_json::json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]
    }))
    .unwrap_or_default();
    let s = from_label_selector(&ls).unwrap_or_else(|_| Selector::nothing());
    assert!(s.matches(&l(&[("app", "web"), ("tier", "fe")])));
    assert!(!s.matches(&l(&[("app", "web")])));
    assert!(from_label_selector(&LabelSelector::default()).is_ok_and(|s| s.is_empty()));
    assert!(!Selector::nothing().matches(&l(&[])));
    assert!(from_label_selector_json(&serde_json::Value::Null).is_ok_and(|s| !s.matches(&l(&[]))));
    assert_eq!(label_selector_as_selector(None), Ok(Selector::nothing()));
}

// From the controllers' selector tests.
#[test]
fn match_labels_and_expressions_all_must_hold() {
    let sel = LabelSelector {
        match_labels: Some(l(&[("app", "web")])),
        match_expressions: Some(vec![
            expr("tier", "In", Some(&["fe", "be"])),
            expr("canary", "DoesNotExist", None),
        ]),
    };
    let s = from_label_selector(&sel).unwrap_or_else(|_| Selector::nothing());
    assert!(s.matches(&l(&[("app", "web"), ("tier", "fe")])));
    assert!(!s.matches(&l(&[("app", "web"), ("tier", "db")])));
    assert!(!s.matches(&l(&[("app", "web"), ("tier", "fe"), ("canary", "1")])));
    assert!(!s.matches(None));
}

#[test]
fn not_in_holds_for_absent_key_and_bad_operator_is_rejected() {
    let sel = expressions(vec![expr("env", "NotIn", Some(&["prod"]))]);
    let s = from_label_selector(&sel).unwrap_or_else(|_| Selector::nothing());
    assert!(s.matches(None));
    assert!(!s.matches(&l(&[("env", "prod")])));
    let bad = expressions(vec![expr("env", "Near", None)]);
    assert_eq!(
        as_selector_err(&bad),
        "\"Near\" is not a valid label selector operator"
    );
}

#[test]
fn label_selector_errors_follow_apimachinery() {
    assert_eq!(
        as_selector_err(&expressions(vec![expr("env", "In", Some(&[]))])),
        "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
    );
    assert_eq!(
        as_selector_err(&expressions(vec![expr("env", "Exists", Some(&["a"]))])),
        "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist"
    );
    let bad_label = LabelSelector {
        match_labels: Some(l(&[("app", "-x")])),
        match_expressions: None,
    };
    assert!(as_selector_err(&bad_label).starts_with("values[0][app]: Invalid value: \"-x\": "));
    // LabelSelector values keep their order and duplicates; printing sorts them.
    let s = from_label_selector(&expressions(vec![expr("t", "In", Some(&["b", "a", "b"]))]));
    assert_eq!(s.map(|s| s.to_string()), Ok("t in (a,b,b)".to_string()));
}

#[test]
fn empty_selector_conventions() {
    assert!(from_label_selector(&LabelSelector::default()).is_ok_and(|s| s.matches(None)));
    assert!(label_selector_as_selector(None).is_ok_and(|s| !s.matches(None)));
    assert!(Selector::from_map(&BTreeMap::new()).matches(None));
    assert!(Selector::parse("").is_ok_and(|s| s.is_empty() && s.matches(None)));
    assert!(!Selector::nothing().is_empty());
}

#[test]
fn set_selector_matches_every_pair() {
    let set = l(&[("app", "web"), ("tier", "fe")]);
    assert!(matches_set(
        &set,
        Some(&l(&[("app", "web"), ("tier", "fe"), ("x", "y")]))
    ));
    assert!(!matches_set(&set, Some(&l(&[("app", "web")]))));
    assert!(!matches_set(&set, None));
    assert!(matches_set(&BTreeMap::new(), None));
    let labels = l(&[("app", "web"), ("tier", "fe")]);
    assert_eq!(
        matches_set(&set, Some(&labels)),
        Selector::from_map(&set).matches(&labels)
    );
}

#[test]
fn lexer_follows_upstream_bytes() {
    // Only space, tab, CR and LF separate tokens; a no-break space is part of the value.
    assert!(Selector::parse("a=b\u{a0}").is_err());
    assert!(Selector::parse("a=b\t,\r\nc").is_ok());
    // A NUL byte ends the input where a token would start; right after an operator or comma it
    // is swallowed (upstream's `scanSpecialSymbol` reads it without unreading).
    assert!(Selector::parse("a=b, \0x").is_err());
    assert!(Selector::parse("a=b,\0x").is_ok_and(|s| s.to_string() == "a=b,x"));
    assert_eq!(
        Selector::parse("a=b \0 ,garbage").map(|s| s.to_string()),
        Ok("a=b".to_string())
    );
}

fn arb_requirement() -> impl Strategy<Value = Requirement> {
    let key = "[a-z]([a-z0-9.-]{0,8}[a-z0-9])?(/[A-Za-z0-9]([A-Za-z0-9_.-]{0,8}[A-Za-z0-9])?)?";
    let val = "([A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?)?";
    let op = prop_oneof![
        Just(Operator::Equals),
        Just(Operator::DoubleEquals),
        Just(Operator::NotEquals),
        Just(Operator::In),
        Just(Operator::NotIn),
        Just(Operator::Exists),
        Just(Operator::DoesNotExist),
        Just(Operator::GreaterThan),
        Just(Operator::LessThan),
    ];
    (
        key,
        op,
        proptest::collection::vec(val, 1..4),
        -1000i64..1000,
    )
        .prop_filter_map("valid", |(k, op, mut vals, n)| {
            let values = match op {
                Operator::Exists | Operator::DoesNotExist => vec![],
                Operator::GreaterThan | Operator::LessThan => vec![n.to_string()],
                Operator::In | Operator::NotIn => {
                    // A parsed set is sorted and unique.
                    vals.sort();
                    vals.dedup();
                    vals
                }
                _ => vals.into_iter().take(1).collect(),
            };
            Requirement::new(&k, op, values).ok()
        })
}

proptest! {
    #[test]
    fn parse_never_panics(s in "\\PC{0,80}") {
        let _ = Selector::parse(&s);
    }

    #[test]
    fn parse_never_panics_on_selector_alphabet(s in "[a-c =!,()<>in ot0-9\t\0]{0,40}") {
        let _ = Selector::parse(&s);
    }

    #[test]
    fn print_parse_roundtrip(reqs in proptest::collection::vec(arb_requirement(), 0..5)) {
        let sel = Selector::from_requirements(reqs);
        let printed = sel.to_string();
        let back = Selector::parse(&printed);
        prop_assert_eq!(back, Ok(sel), "printed: {}", printed);
    }
}
