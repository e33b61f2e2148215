use std::sync::Arc;

use cel::{Context, ExecutionError};

use super::*;
use crate::policy::environment;

fn analysed(source: &str) -> Analysis {
    analyse(environment().compile(source).expect("parses").expression())
}

#[test]
fn every_listed_function_is_one_the_environment_calls() {
    let samples = [
        "size('a')",
        "'ab'.contains('a')",
        "'ab'.startsWith('a')",
        "'ab'.endsWith('b')",
        "int('1')",
        "uint(1)",
        "double(1)",
        "string(1)",
        "bytes('a')",
        "bool('true')",
        "type(1)",
        "dyn(1)",
        "optional.of(1).hasValue()",
        "optional.ofNonZeroValue(1).value()",
        "optional.none().orValue(1)",
        "optional.none().or(optional.of(1))",
        "path.clean('/a/../b')",
        "path.within('/a/b', '/a')",
    ];
    let env = Arc::new(environment());
    for function in FUNCTIONS {
        let short = function.rsplit('.').next().unwrap_or(function);
        let sample = samples.iter().find(|sample| sample.contains(&format!("{short}(")));
        let sample = sample.unwrap_or_else(|| panic!("no sample calls `{function}`"));
        let answer = env.compile(sample).expect("parses").execute(&Context::with_env(env.clone()));
        assert!(!matches!(answer, Err(ExecutionError::UndeclaredReference(_))), "{sample}: {answer:?}");
        assert!(analysed(sample).unknown.is_empty(), "{sample}");
    }
}

#[test]
fn unknown_names_and_functions_are_found_and_bound_variables_are_not() {
    assert_eq!(analysed("argument.path == '/x'").unknown, ["argument"]);
    assert_eq!(analysed("arguments.path.lowerAscii() == '/x'").unknown, ["lowerAscii()"]);
    assert_eq!(analysed("sizes(arguments) < 3 || path.nope('a')").unknown, ["sizes()", "nope()", "path"]);
    assert!(analysed("arguments.items.all(x, x != identity.subject) && type(kind) == string").unknown.is_empty());
    assert!(analysed("has(arguments.path) && [1, 2].exists(n, n == 1) && {'a': 1}.all(k, k == 'a')").unknown.is_empty());
}

#[test]
fn the_estimate_grows_with_the_input_as_the_rule_nests() {
    let degree = |source: &str| analysed(source).cost.degree();
    assert_eq!(degree("identity != null && server == 'demo'"), Some(0));
    assert_eq!(degree("[1, 2, 3].exists(n, n == 2)"), Some(0), "a literal range is not the input");
    assert_eq!(degree("arguments.path.startsWith('/srv/public/')"), Some(1));
    assert_eq!(degree("arguments.items.exists(x, x == 'evil')"), Some(1), "each element is compared once");
    assert_eq!(degree("arguments.items.all(x, arguments.items.filter(y, y == x).size() == 1)"), Some(2));
    assert_eq!(degree("arguments.items.all(x, x in arguments.allowed)"), Some(2), "`in` searches the whole list each time");
    assert_eq!(degree("arguments.items.map(x, x + arguments.suffix).size() > 0"), Some(2), "a copy of the input per element");
    let five = "arguments.a.all(a, arguments.a.all(b, arguments.a.all(c, arguments.a.all(d, arguments.a.all(e, e == d)))))";
    assert_eq!(degree(five), None, "past the highest degree kept, the estimate is infinite");
    assert_eq!(analysed(five).cost.at(2.0), f64::INFINITY);
}

#[test]
fn the_estimate_is_evaluated_as_a_polynomial() {
    let cost = analysed("arguments.items.all(x, arguments.items.exists(y, y == x))").cost;
    let (small, large) = (cost.at(10.0), cost.at(20_000.0));
    assert!(small < 10_000.0, "{small}");
    assert!(large > 20_000.0 * 20_000.0, "{large}");
}
