//! Kinds with no rules of their own beyond, at most, their Table columns:
//! the default strategy every built-in resource starts with, and the few
//! that only print differently. A kind that needs more gets its own module.

use super::KindStrategy;
use crate::table::{Printer, core, networking};

/// Every default rule, printed with the given columns.
#[derive(Debug)]
pub(crate) struct Plain {
    printer: &'static Printer,
}

impl KindStrategy for Plain {
    fn printer(&self) -> &'static Printer {
        self.printer
    }
}

/// Kinds without a rule of their own: NAME and AGE.
pub(crate) static PLAIN: Plain = Plain {
    printer: &core::DEFAULT,
};

/// Ingresses print their class, hosts, address and ports.
pub(crate) static INGRESSES: Plain = Plain {
    printer: &networking::INGRESSES,
};
