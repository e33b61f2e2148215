//! What a compiled `when` is checked for at load: every name and function
//! it uses is one the policy knows, and its cost, as a polynomial in the
//! size of its input, is estimated.
//!
//! Invariants:
//! - the estimate is an upper bound, up to the constant of one step, of
//!   the interpreter's work: a comprehension multiplies its body by the
//!   size of its range (the input's size unless the range is a list
//!   literal), and an operation whose work grows with a value (copying,
//!   comparing, searching, converting) costs the input's size when one of
//!   its operands may be as large as the input, one step otherwise;
//! - a degree above [`MAX_DEGREE`] is infinite: such a rule is refused at
//!   load;
//! - an unknown name or function is found before any request meets it.

use cel::common::ast::{operators, EntryExpr, Expr, IdedExpr};

/// The names a `when` may read (see the module doc of [`crate::policy`]).
pub const VARIABLES: &[&str] = &["identity", "server", "kind", "name", "tool", "prompt", "resource", "arguments"];

/// CEL's type names, which are values too (`type(x) == string`).
const TYPE_NAMES: &[&str] = &["int", "uint", "double", "string", "bytes", "bool", "list", "map", "null_type", "type", "dyn"];

/// The functions of the environment besides the operators: CEL's standard
/// library as the `cel` crate builds it without its optional features,
/// the optional-value library, and ours ([`super::paths`]). A unit test
/// calls each, so the list cannot name one the environment lacks.
pub const FUNCTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.none",
    "hasValue",
    "value",
    "or",
    "orValue",
    super::paths::CLEAN,
    super::paths::WITHIN,
];

/// The highest power of the input's size an estimate keeps.
pub const MAX_DEGREE: usize = 4;

/// An estimated cost: `coefficients[k]` steps per `n^k`, `n` the size of
/// the input ([`super::input_size`]); `None` when the degree is above
/// [`MAX_DEGREE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost(Option<[f64; MAX_DEGREE + 1]>);

impl Cost {
    pub const ZERO: Cost = Cost(Some([0.0; MAX_DEGREE + 1]));

    fn constant(steps: f64) -> Cost {
        let mut coefficients = [0.0; MAX_DEGREE + 1];
        coefficients[0] = steps;
        Cost(Some(coefficients))
    }

    /// One step per unit of the input's size.
    fn linear() -> Cost {
        let mut coefficients = [0.0; MAX_DEGREE + 1];
        coefficients[1] = 1.0;
        Cost(Some(coefficients))
    }

    fn plus(self, other: Cost) -> Cost {
        match (self.0, other.0) {
            (Some(mut a), Some(b)) => {
                a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                Cost(Some(a))
            }
            _ => Cost(None),
        }
    }

    fn times(self, factor: f64) -> Cost {
        Cost(self.0.map(|coefficients| coefficients.map(|c| c * factor)))
    }

    /// This cost once per unit of the input's size.
    fn times_input(self) -> Cost {
        match self.0 {
            Some(coefficients) if coefficients[MAX_DEGREE] == 0.0 => {
                let mut shifted = [0.0; MAX_DEGREE + 1];
                shifted[1..].copy_from_slice(&coefficients[..MAX_DEGREE]);
                Cost(Some(shifted))
            }
            _ => Cost(None),
        }
    }

    /// The steps for an input of size `n`; infinite past [`MAX_DEGREE`].
    pub fn at(self, n: f64) -> f64 {
        match self.0 {
            Some(coefficients) => coefficients.iter().rev().fold(0.0, |sum, c| sum * n + c),
            None => f64::INFINITY,
        }
    }

    /// The highest power of the input's size with a step in it.
    pub fn degree(self) -> Option<usize> {
        self.0.map(|coefficients| coefficients.iter().rposition(|c| *c != 0.0).unwrap_or(0))
    }
}

/// What the walk found in one `when`.
#[derive(Debug)]
pub struct Analysis {
    pub cost: Cost,
    /// Names and functions the environment does not know, in the order met.
    pub unknown: Vec<String>,
}

/// Analyses a compiled `when`.
pub fn analyse(expression: &IdedExpr) -> Analysis {
    let mut walk = Walk { bound: Vec::new(), unknown: Vec::new() };
    let (cost, _) = walk.expr(expression);
    Analysis { cost, unknown: walk.unknown }
}

/// How large a value may be: the input's size, or bounded (a literal, a
/// boolean, a number, or one element of a range: the elements of a range
/// add up to its size, so work on each is counted once per element).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Size {
    Bounded,
    Input,
}

struct Walk {
    /// Comprehension variables in scope.
    bound: Vec<String>,
    unknown: Vec<String>,
}

impl Walk {
    fn expr(&mut self, expression: &IdedExpr) -> (Cost, Size) {
        let one = Cost::constant(1.0);
        match &expression.expr {
            Expr::Unspecified => (Cost::ZERO, Size::Bounded),
            Expr::Literal(_) => (one, Size::Bounded),
            Expr::Ident(name) => (one, self.ident(name)),
            Expr::Select(select) => {
                let (cost, size) = self.expr(&select.operand);
                (cost.plus(one), if select.test { Size::Bounded } else { size })
            }
            Expr::List(list) => self.all(list.elements.iter(), one),
            Expr::Map(map) => self.entries(map.entries.iter().map(|entry| &entry.expr), one),
            Expr::Struct(object) => self.entries(object.entries.iter().map(|entry| &entry.expr), one),
            Expr::Call(call) => {
                let namespaced = match call.target.as_deref().map(|target| &target.expr) {
                    Some(Expr::Ident(namespace)) => Some(format!("{namespace}.{}", call.func_name)),
                    _ => None,
                };
                let known = namespaced.filter(|function| FUNCTIONS.contains(&function.as_str()));
                let operands: Vec<&IdedExpr> = match known {
                    Some(_) => call.args.iter().collect(),
                    None => call.target.as_deref().into_iter().chain(&call.args).collect(),
                };
                if known.is_none() {
                    self.function(&call.func_name);
                }
                let function = known.unwrap_or_else(|| call.func_name.clone());
                let (mut cost, mut sizes) = (Cost::ZERO, Vec::with_capacity(operands.len()));
                for operand in operands {
                    let (more, size) = self.expr(operand);
                    cost = cost.plus(more);
                    sizes.push(size);
                }
                let own = if grows(&function, &sizes) { Cost::linear() } else { one };
                let size = sizes.iter().copied().max().unwrap_or(Size::Bounded);
                (cost.plus(own), result_size(&function, size))
            }
            Expr::Comprehension(comprehension) => {
                let (range, _) = self.expr(&comprehension.iter_range);
                let (init, _) = self.expr(&comprehension.accu_init);
                let scope = self.bound.len();
                self.bound.extend(comprehension.iter_var2.iter().cloned());
                self.bound.push(comprehension.iter_var.clone());
                self.bound.push(comprehension.accu_var.clone());
                let (condition, _) = self.expr(&comprehension.loop_cond);
                let (step, _) = self.expr(&comprehension.loop_step);
                let (result, _) = self.expr(&comprehension.result);
                self.bound.truncate(scope);
                let body = condition.plus(step).plus(one);
                let body = match &comprehension.iter_range.expr {
                    Expr::List(list) => body.times(list.elements.len() as f64),
                    _ => body.times_input(),
                };
                (range.plus(init).plus(body).plus(result), Size::Input)
            }
        }
    }

    /// The cost of `expressions` plus `own`, and the largest of their sizes.
    fn all<'e>(&mut self, expressions: impl Iterator<Item = &'e IdedExpr>, own: Cost) -> (Cost, Size) {
        expressions.fold((own, Size::Bounded), |(cost, size), expression| {
            let (more, its) = self.expr(expression);
            (cost.plus(more), size.max(its))
        })
    }

    fn entries<'e>(&mut self, entries: impl Iterator<Item = &'e EntryExpr>, own: Cost) -> (Cost, Size) {
        let mut parts = Vec::new();
        for entry in entries {
            match entry {
                EntryExpr::StructField(field) => parts.push(&field.value),
                EntryExpr::MapEntry(entry) => parts.extend([&entry.key, &entry.value]),
            }
        }
        self.all(parts.into_iter(), own)
    }

    fn ident(&mut self, name: &str) -> Size {
        if self.bound.iter().any(|bound| bound == name) || name.starts_with('@') {
            return Size::Bounded;
        }
        if !VARIABLES.contains(&name) && !TYPE_NAMES.contains(&name) && !self.unknown.iter().any(|known| known == name) {
            self.unknown.push(name.to_string());
        }
        if TYPE_NAMES.contains(&name) {
            Size::Bounded
        } else {
            Size::Input
        }
    }

    fn function(&mut self, name: &str) {
        let operator = name.starts_with('_') || name.starts_with('@') || name == operators::LOGICAL_NOT || name == operators::NEGATE;
        if !operator && !FUNCTIONS.contains(&name) && !self.unknown.iter().any(|known| known == name) {
            self.unknown.push(format!("{name}()"));
        }
    }
}

/// Whether a call's work grows with the input, given its operands' sizes:
/// a copy (`+`) of one as large as the input, a comparison of two such, a
/// search (`in`) of such a list, and any function (but the operators) of one.
fn grows(function: &str, operands: &[Size]) -> bool {
    let input = |index: usize| operands.get(index) == Some(&Size::Input);
    match function {
        operators::ADD => operands.contains(&Size::Input),
        operators::IN => input(1),
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => input(0) && input(1),
        operator if operator.starts_with('_') || operator.starts_with('@') || operator.ends_with('_') => false,
        _ => operands.contains(&Size::Input),
    }
}

/// How large a call's answer may be: booleans and numbers are bounded, a
/// copy, an element or a conversion as large as its operands.
fn result_size(function: &str, operands: Size) -> Size {
    match function {
        operators::ADD | operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT | operators::CONDITIONAL => operands,
        "string" | "bytes" | "dyn" | "value" | "orValue" | "or" | "optional.of" | "optional.ofNonZeroValue" => operands,
        super::paths::CLEAN => operands,
        _ => Size::Bounded,
    }
}

#[cfg(test)]
mod tests;
