//! Nodes: the one kind with a status subresource whose status on create is
//! kept (a node agent registers its node with its status).

use super::{InitialStatus, KindStrategy};
use crate::table::Printer;

/// The `nodes` resource.
#[derive(Debug)]
pub(crate) struct Nodes;

impl KindStrategy for Nodes {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Kept
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::core::NODES
    }
}
