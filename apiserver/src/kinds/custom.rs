//! CustomResourceDefinitions and custom resources, delegating to `crd/`:
//! a CRD gets its defaults, its cleanup finalizer and its checks from
//! `crd::definition`; a custom object is pruned, defaulted and validated
//! against its version's schema and scaled along its scale paths (its
//! printer columns print it: [`ResourceInfo::table`]).

use serde_json::Value;

use super::KindStrategy;
use crate::crd::definition;
use crate::kinds::Written;
use crate::registry::ResourceInfo;
use crate::status::FieldError;

/// `apiextensions.k8s.io/v1` customresourcedefinitions.
#[derive(Debug)]
pub(crate) struct CustomResourceDefinitions;

impl KindStrategy for CustomResourceDefinitions {
    fn on_create(&self, object: &mut Value, _notes: &crate::request_notes::RequestNotes) {
        definition::add_cleanup_finalizer(object);
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        definition::apply_defaults(object);
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, .. } = *written;
        definition::validate(object, errors);
    }
}

/// Every served version of every CRD; the version's schema, scale paths
/// and printer columns come with `info.custom`.
#[derive(Debug)]
pub(crate) struct CustomResources;

impl KindStrategy for CustomResources {
    fn apply_defaults(&self, info: &ResourceInfo, object: &mut Value) {
        if let Some(custom) = &info.custom {
            custom.prune_and_default(object);
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written {
            info, object, old, ..
        } = *written;
        if let Some(custom) = &info.custom {
            errors.extend(custom.validate(object, old));
        }
    }

    fn scale(&self, info: &ResourceInfo, object: &Value) -> Value {
        match info.custom.as_ref().and_then(|c| c.scale.as_ref()) {
            Some(paths) => crate::crd::scale::view(paths, object),
            None => super::scale::view(object, super::scale::label_selector(object)),
        }
    }

    fn set_replicas(&self, info: &ResourceInfo, object: &mut Value, replicas: i64) {
        match info.custom.as_ref().and_then(|c| c.scale.as_ref()) {
            Some(paths) => crate::crd::scale::set_replicas(paths, object, replicas),
            None => super::scale::set_spec_replicas(object, replicas),
        }
    }
}
