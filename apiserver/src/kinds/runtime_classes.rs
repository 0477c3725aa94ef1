//! `node.k8s.io/v1` RuntimeClasses: which CRI runtime handler a pod's
//! sandbox runs under, what the sandbox costs beyond its containers
//! (`overhead.podFixed`) and where such pods may go (`scheduling`). What a
//! class adds to a pod that names it is the pods' admission
//! (`pods/admission.rs`); the node agent hands the handler to the runtime.

use super::KindStrategy;
use super::quota::quantities;
use crate::kinds::Written;
use crate::status::FieldError;
use crate::validation::{NameRule, validate_label_value, validate_name, validate_qualified_name};

/// The `runtimeclasses` resource.
#[derive(Debug)]
pub(crate) struct RuntimeClasses;

impl KindStrategy for RuntimeClasses {
    /// Upstream's rules: the handler is a DNS label and never changes; the
    /// overhead is quantities of at least zero; the scheduling node
    /// selector is labels.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written {
            object: class, old, ..
        } = *written;
        let handler = class["handler"].as_str().unwrap_or("");
        if let Some(old) = old {
            if class["handler"] != old["handler"] {
                errors.push(FieldError::invalid(
                    "handler",
                    handler,
                    "field is immutable",
                ));
            }
            return;
        }
        errors.extend(validate_name(NameRule::Label, handler, "handler"));
        quantities(&class["overhead"]["podFixed"], "overhead.podFixed", errors);
        let selector = &class["scheduling"]["nodeSelector"];
        for (key, value) in selector.as_object().into_iter().flatten() {
            let path = "scheduling.nodeSelector";
            errors.extend(validate_qualified_name(key, path));
            errors.extend(validate_label_value(value.as_str().unwrap_or(""), path));
        }
    }
}
