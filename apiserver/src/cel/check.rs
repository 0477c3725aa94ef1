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
/// enclosing comprehension; returns the declared roots the expression names.
pub(super) fn declared_only(
    expr: &IdedExpr,
    declared: &Declarations,
) -> Result<Vec<String>, CompileError> {
    let mut walker = Walker {
        declared,
        scope: Vec::new(),
        used: Vec::new(),
    };
    walker.walk(expr)?;
    Ok(walker.used)
}

struct Walker<'d> {
    declared: &'d Declarations,
    /// Comprehension variables in scope.
    scope: Vec<String>,
    used: Vec<String>,
}

impl Walker<'_> {
    fn walk(&mut self, expr: &IdedExpr) -> Result<(), CompileError> {
        let declared = self.declared;
        match &expr.expr {
            Expr::Ident(name) => {
                let bound = self.scope.iter().any(|s| s == name);
                let root = declared.roots.contains(&name.as_str());
                if !bound && root && !self.used.contains(name) {
                    self.used.push(name.clone());
                }
                if !(bound || root || ALWAYS.contains(&name.as_str())) {
                    return Err(CompileError::Undeclared(name.clone()));
                }
            }
            Expr::Select(select) => {
                if let (Expr::Ident(root), Some((fields_root, names))) =
                    (&select.operand.expr, &declared.fields)
                    && root == fields_root
                    && !self.scope.iter().any(|s| s == root)
                    && !names.contains(&select.field)
                {
                    return Err(CompileError::UndefinedVariable(select.field.clone()));
                }
                self.walk(&select.operand)?;
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target)?;
                }
                for arg in &call.args {
                    self.walk(arg)?;
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.walk(element)?;
                }
            }
            Expr::Map(map) => self.walk_entries(&map.entries)?,
            Expr::Struct(s) => self.walk_entries(&s.entries)?,
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range)?;
                self.walk(&c.accu_init)?;
                let depth = self.scope.len();
                self.scope.push(c.iter_var.clone());
                if let Some(second) = &c.iter_var2 {
                    self.scope.push(second.clone());
                }
                self.scope.push(c.accu_var.clone());
                let inner = self
                    .walk(&c.loop_cond)
                    .and_then(|()| self.walk(&c.loop_step))
                    .and_then(|()| self.walk(&c.result));
                self.scope.truncate(depth);
                inner?;
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
        Ok(())
    }

    fn walk_entries(
        &mut self,
        entries: &[cel::common::ast::IdedEntryExpr],
    ) -> Result<(), CompileError> {
        for entry in entries {
            match &entry.expr {
                EntryExpr::StructField(field) => self.walk(&field.value)?,
                EntryExpr::MapEntry(entry) => {
                    self.walk(&entry.key)?;
                    self.walk(&entry.value)?;
                }
            }
        }
        Ok(())
    }
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
    let guarded =
        call.func_name == "_?_:_" && call.args.len() == 3 && is_ident(&call.args[2], accu);
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
