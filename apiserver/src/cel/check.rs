//! What compiling adds to parsing: every free identifier must be declared
//! (cel-rust has no type checker, so this is the check upstream's compiler
//! does that we can do without types), and every comprehension is metered
//! by a call to the budget function on each iteration.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr};

use super::{CompileError, Declarations};

/// Names an expression may always use: CEL's type names and the
/// namespaces of the extension libraries.
const ALWAYS: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "math",
    "strings",
    "lists",
    "base64",
    "optional",
];

/// Fails on the first identifier that is neither declared nor bound by an
/// enclosing comprehension.
pub(super) fn declared_only(expr: &IdedExpr, declared: &Declarations) -> Result<(), CompileError> {
    let mut scope = Vec::new();
    walk(expr, declared, &mut scope)
}

fn walk(
    expr: &IdedExpr,
    declared: &Declarations,
    scope: &mut Vec<String>,
) -> Result<(), CompileError> {
    match &expr.expr {
        Expr::Ident(name) => {
            let known = scope.iter().any(|s| s == name)
                || declared.roots.contains(&name.as_str())
                || ALWAYS.contains(&name.as_str());
            if !known {
                return Err(CompileError::Undeclared(name.clone()));
            }
        }
        Expr::Select(select) => {
            if let (Expr::Ident(root), Some((fields_root, names))) =
                (&select.operand.expr, &declared.fields)
                && root == fields_root
                && !scope.iter().any(|s| s == root)
                && !names.contains(&select.field)
            {
                return Err(CompileError::UndefinedVariable(select.field.clone()));
            }
            walk(&select.operand, declared, scope)?;
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                walk(target, declared, scope)?;
            }
            for arg in &call.args {
                walk(arg, declared, scope)?;
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, declared, scope)?;
            }
        }
        Expr::Map(map) => walk_entries(&map.entries, declared, scope)?,
        Expr::Struct(s) => walk_entries(&s.entries, declared, scope)?,
        Expr::Comprehension(c) => {
            walk(&c.iter_range, declared, scope)?;
            walk(&c.accu_init, declared, scope)?;
            let depth = scope.len();
            scope.push(c.iter_var.clone());
            if let Some(second) = &c.iter_var2 {
                scope.push(second.clone());
            }
            scope.push(c.accu_var.clone());
            let inner = walk(&c.loop_cond, declared, scope)
                .and_then(|()| walk(&c.loop_step, declared, scope))
                .and_then(|()| walk(&c.result, declared, scope));
            scope.truncate(depth);
            inner?;
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
    Ok(())
}

fn walk_entries(
    entries: &[cel::common::ast::IdedEntryExpr],
    declared: &Declarations,
    scope: &mut Vec<String>,
) -> Result<(), CompileError> {
    for entry in entries {
        match &entry.expr {
            EntryExpr::StructField(field) => walk(&field.value, declared, scope)?,
            EntryExpr::MapEntry(entry) => {
                walk(&entry.key, declared, scope)?;
                walk(&entry.value, declared, scope)?;
            }
        }
    }
    Ok(())
}

/// Wraps one expression of every comprehension in a call to `cost`, so each
/// iteration charges the budget. Which one keeps the interpreter's fast
/// paths: the loop condition when it is not a constant (`all`, `exists`),
/// otherwise the appended element or the filter's guard (`map`, `filter`),
/// otherwise the whole step.
pub(super) fn meter_comprehensions(expr: &mut IdedExpr, cost: &str) {
    match &mut expr.expr {
        Expr::Comprehension(c) => {
            for child in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                meter_comprehensions(child, cost);
            }
            if !matches!(c.loop_cond.expr, Expr::Literal(_)) {
                wrap(&mut c.loop_cond, cost);
            } else if let Some(target) = append_target(&mut c.loop_step, &c.accu_var) {
                wrap(target, cost);
            } else {
                wrap(&mut c.loop_step, cost);
            }
        }
        Expr::Select(select) => meter_comprehensions(&mut select.operand, cost),
        Expr::Call(call) => {
            if let Some(target) = &mut call.target {
                meter_comprehensions(target, cost);
            }
            for arg in &mut call.args {
                meter_comprehensions(arg, cost);
            }
        }
        Expr::List(list) => {
            for element in &mut list.elements {
                meter_comprehensions(element, cost);
            }
        }
        Expr::Map(map) => meter_entries(&mut map.entries, cost),
        Expr::Struct(s) => meter_entries(&mut s.entries, cost),
        _ => {}
    }
}

fn meter_entries(entries: &mut [cel::common::ast::IdedEntryExpr], cost: &str) {
    for entry in entries {
        match &mut entry.expr {
            EntryExpr::StructField(field) => meter_comprehensions(&mut field.value, cost),
            EntryExpr::MapEntry(entry) => {
                meter_comprehensions(&mut entry.key, cost);
                meter_comprehensions(&mut entry.value, cost);
            }
        }
    }
}

/// In a `map`/`filter` step (`accu + [e]`, or `g ? accu + [e] : accu`), the
/// expression evaluated once per iteration that can be wrapped without
/// changing the step's shape: `g` when guarded, else `e`.
fn append_target<'e>(step: &'e mut IdedExpr, accu: &str) -> Option<&'e mut IdedExpr> {
    let Expr::Call(call) = &mut step.expr else {
        return None;
    };
    if call.target.is_some() {
        return None;
    }
    let guarded = call.func_name == "_?_:_"
        && call.args.len() == 3
        && is_ident(&call.args[2], accu);
    if guarded {
        return call.args.first_mut();
    }
    let appends = call.func_name == "_+_"
        && call.args.len() == 2
        && is_ident(&call.args[0], accu)
        && matches!(&call.args[1].expr, Expr::List(list) if list.elements.len() == 1);
    if !appends {
        return None;
    }
    match &mut call.args[1].expr {
        Expr::List(list) => list.elements.first_mut(),
        _ => None,
    }
}

fn is_ident(expr: &IdedExpr, name: &str) -> bool {
    matches!(&expr.expr, Expr::Ident(n) if n == name)
}

/// Replaces `expr` with `cost(expr)`.
fn wrap(expr: &mut IdedExpr, cost: &str) {
    let inner = std::mem::take(expr);
    *expr = IdedExpr {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: cost.to_string(),
            target: None,
            args: vec![inner],
        }),
    };
}
