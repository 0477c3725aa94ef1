//! The one CEL engine of the server, shared by ValidatingAdmissionPolicy
//! (`admission_plugins::validating_policy`) and CRD `x-kubernetes-validations`
//! (`crd::rules`). It owns compiling expressions (parse, check that every
//! free identifier is one the caller declares, a cache of compiled
//! programs), turning JSON into CEL values and back, and the limits that
//! keep a hostile expression from holding the server: a [`Budget`] of loop
//! iterations and a wall-clock deadline, both checked on every iteration of
//! every comprehension (`all`, `exists`, `map`, `filter`, ...).
//!
//! The library is cel-rust (`cel`): the standard library plus its strings,
//! lists and math extensions. It has no type checker, so "compiles" here
//! means parses and names only declared variables; type errors show at
//! evaluation and are runtime errors.
//!
//! Nothing here knows about admission or CRDs: callers name the variables
//! and decide what a result or an error means. It must never block on I/O.

mod check;
mod values;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use cel::common::ast::IdedExpr;
use cel::{Context, Env, ExecutionError};
use parking_lot::Mutex;

pub(crate) use cel::Value;
pub(crate) use values::from_json;
pub(crate) use values::to_json;

/// The internal function every comprehension iteration calls to charge the
/// budget; `@` keeps it out of reach of expressions as written.
const COST_FUNCTION: &str = "@skiff_cost";

/// Loop iterations one evaluation may run (upstream's per-call cost limit
/// is a million units; an iteration is our unit).
pub(crate) const DEFAULT_ITERATIONS: u64 = 1_000_000;

/// Wall-clock time one evaluation may take.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);

/// Compiled programs kept before the cache starts over.
const CACHE_CAPACITY: usize = 2048;

/// Why an expression does not compile; the text is the message upstream
/// puts after `compilation failed: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CompileError {
    /// The parser's own report, already in cel-go's form
    /// (`ERROR: <input>:1:23: Syntax error: …` with the caret lines).
    #[error("{0}")]
    Syntax(String),
    /// A name that is neither a declared variable nor in scope.
    #[error("ERROR: <input>: undeclared reference to '{0}' (in container '')")]
    Undeclared(String),
    /// A field of a declared map (`variables.x`) that is not declared.
    #[error("ERROR: <input>: undefined field '{0}'")]
    UndefinedVariable(String),
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EvalError {
    /// The expression went wrong on this input (no such key, no overload,
    /// division by zero, ...).
    #[error("{0}")]
    Runtime(String),
    /// The budget of iterations ran out.
    #[error("operation cancelled: actual cost limit exceeded")]
    CostExceeded,
    /// The deadline passed.
    #[error("operation cancelled: evaluation timed out")]
    Timeout,
    /// The result has the wrong type for what the caller asked.
    #[error("expected {expected} but got {got}")]
    WrongType {
        /// The type the caller asked for.
        expected: &'static str,
        /// The type the expression gave.
        got: String,
    },
}

/// The environment every program runs in.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // The extensions only fail on names declared twice, which a fresh
    // standard environment does not have; a failure leaves the function out.
    for extension in [
        cel::extensions::strings as fn(&mut Env) -> Result<(), cel::DeclarationError>,
        cel::extensions::lists,
        cel::extensions::math,
    ] {
        if let Err(error) = env.add_extension(extension) {
            tracing::warn!(%error, "CEL extension not loaded");
        }
    }
    Arc::new(env)
});

static CACHE: LazyLock<Mutex<HashMap<String, Arc<Program>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A compiled expression, ready to evaluate any number of times.
#[derive(Debug)]
pub(crate) struct Program {
    source: String,
    expression: IdedExpr,
    /// The declared root variables the expression names.
    roots_used: Vec<String>,
}

impl Program {
    /// The expression as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression names the root variable `root` (a CRD rule
    /// naming `oldSelf` is a transition rule).
    pub(crate) fn uses(&self, root: &str) -> bool {
        self.roots_used.iter().any(|r| r == root)
    }
}

/// What a program may name: its root variables, and for a root variable
/// that is a map of declared names (`variables`), those names.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declarations {
    /// The root variables, e.g. `self` or `object`.
    pub roots: Vec<&'static str>,
    /// The root whose fields must be declared, and its field names.
    pub fields: Option<(&'static str, Vec<String>)>,
}

impl Declarations {
    /// Only these root variables.
    pub(crate) fn roots(roots: &[&'static str]) -> Self {
        Self {
            roots: roots.to_vec(),
            fields: None,
        }
    }

    fn cache_key(&self, source: &str) -> String {
        let fields = self
            .fields
            .as_ref()
            .map(|(root, names)| format!("{root}:{}", names.join(",")))
            .unwrap_or_default();
        format!("{}\u{0}{fields}\u{0}{source}", self.roots.join(","))
    }
}

/// Compiles `source` for a program that may name what `declared` says,
/// from the cache when it was compiled before.
pub(crate) fn compile(source: &str, declared: &Declarations) -> Result<Arc<Program>, CompileError> {
    let key = declared.cache_key(source);
    if let Some(program) = CACHE.lock().get(&key) {
        return Ok(program.clone());
    }
    let parsed = ENV
        .compile(source)
        .map_err(|e| CompileError::Syntax(e.to_string()))?;
    let mut expression = parsed.expression().clone();
    let roots_used = check::declared_only(&expression, declared)?;
    check::meter_comprehensions(&mut expression, COST_FUNCTION);
    let program = Arc::new(Program {
        source: source.to_string(),
        expression,
        roots_used,
    });
    let mut cache = CACHE.lock();
    if cache.len() >= CACHE_CAPACITY {
        cache.clear();
    }
    cache.insert(key, program.clone());
    Ok(program)
}

/// What evaluations may spend: loop iterations and wall-clock time. One
/// budget may be shared by several evaluations (every rule of one custom
/// object, every expression of one policy).
#[derive(Debug)]
pub(crate) struct Budget {
    iterations: AtomicU64,
    deadline: Instant,
}

impl Budget {
    /// `iterations` loop iterations, until `timeout` from now.
    pub(crate) fn new(iterations: u64, timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            iterations: AtomicU64::new(iterations),
            deadline: Instant::now() + timeout,
        })
    }

    /// The default limits.
    pub(crate) fn standard() -> Arc<Self> {
        Self::new(DEFAULT_ITERATIONS, DEFAULT_TIMEOUT)
    }

    fn charge(&self) -> Result<(), EvalError> {
        let spent = self
            .iterations
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(1)
            });
        if spent.is_err() {
            return Err(EvalError::CostExceeded);
        }
        if Instant::now() > self.deadline {
            return Err(EvalError::Timeout);
        }
        Ok(())
    }

    fn check_deadline(&self) -> Result<(), EvalError> {
        if Instant::now() > self.deadline {
            Err(EvalError::Timeout)
        } else {
            Ok(())
        }
    }
}

/// Runs `program` with `variables` bound, charging `budget`.
pub(crate) fn evaluate(
    program: &Program,
    variables: &[(&str, Value)],
    budget: &Arc<Budget>,
) -> Result<Value, EvalError> {
    budget.check_deadline()?;
    let mut context = Context::with_env(ENV.clone());
    for (name, value) in variables {
        context.add_variable_from_value(*name, value.clone());
    }
    let charged = budget.clone();
    let overrun = Arc::new(Mutex::new(None::<EvalError>));
    let noted = overrun.clone();
    let metered = context.add_function(COST_FUNCTION, move |value: Value| match charged.charge() {
        Ok(()) => Ok(value),
        Err(error) => {
            let message = error.to_string();
            *noted.lock() = Some(error);
            Err(ExecutionError::function_error(COST_FUNCTION, message))
        }
    });
    if let Err(error) = metered {
        return Err(EvalError::Runtime(error.to_string()));
    }
    let result = context.resolve(&program.expression);
    // The limit's error, when one was hit, wins over whatever the
    // interpreter made of it.
    if let Some(error) = overrun.lock().take() {
        return Err(error);
    }
    result.map_err(|e| EvalError::Runtime(runtime_message(&e)))
}

/// Upstream's wording where it differs from the library's.
fn runtime_message(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        other => other.to_string(),
    }
}

/// A result that must be a bool.
pub(crate) fn as_bool(value: &Value) -> Result<bool, EvalError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(EvalError::WrongType {
            expected: "bool",
            got: type_name(other),
        }),
    }
}

/// A result that must be a string.
pub(crate) fn as_string(value: &Value) -> Result<String, EvalError> {
    match value {
        Value::String(s) => Ok(s.to_string()),
        other => Err(EvalError::WrongType {
            expected: "string",
            got: type_name(other),
        }),
    }
}

/// CEL's name for the type of `value`.
pub(crate) fn type_name(value: &Value) -> String {
    value.type_of().to_string()
}

#[cfg(test)]
mod tests;
