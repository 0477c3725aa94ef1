//! Assembles whole documents: one OpenAPI v3 document per group version
//! with its index, and the single OpenAPI v2 (Swagger) document.

use serde_json::{Map, Value, json};

use super::paths::{ResourceSchema, paths};
use super::schemas::{Dialect, SchemaSet};
use super::{Document, V3Documents};
use crate::registry::{Registry, ResourceInfo};

const TITLE: &str = "Kubernetes";

fn info() -> Value {
    let version = crate::discovery::version();
    json!({ "title": TITLE, "version": version["gitVersion"] })
}

/// Adds the schemas of a resource's kind and its subresources' kinds;
/// `None` when the kind's schema is unknown (it is then left out).
fn resource_schema<'a>(set: &mut SchemaSet, info: &'a ResourceInfo) -> Option<ResourceSchema<'a>> {
    if info.custom.is_some() {
        let declared = info.custom.as_ref().and_then(|c| c.openapi_schema.as_ref());
        let schema = set.add_custom_kind(info.group, info.version, info.kind, declared);
        return Some(ResourceSchema {
            info,
            schema,
            subresource_schemas: info
                .subresources
                .iter()
                .filter_map(|sub| {
                    let (g, v, k) = sub.kind()?;
                    Some((*sub, set.add_kind(g, v, k)?))
                })
                .collect(),
            // Custom resources take JSON merge patches, not strategic ones.
            strategic: false,
        });
    }
    let schema = set.add_kind(info.group, info.version, info.kind)?;
    let subresource_schemas = info
        .subresources
        .iter()
        .filter_map(|sub| {
            let (g, v, k) = sub.kind()?;
            Some((*sub, set.add_kind(g, v, k)?))
        })
        .collect();
    Some(ResourceSchema {
        info,
        schema,
        subresource_schemas,
        strategic: true,
    })
}

/// `api/v1` or `apis/<group>/<version>`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn security_v3() -> Value {
    json!({ "BearerToken": {
        "type": "apiKey",
        "description": "Bearer Token authentication",
        "name": "authorization",
        "in": "header",
    }})
}

/// The v3 document of one group version.
fn v3_group_version(registry: &Registry, group: &str, version: &str) -> Value {
    let mut set = SchemaSet::new(Dialect::V3);
    let resources: Vec<ResourceSchema<'_>> = registry
        .in_group_version(group, version)
        .filter_map(|info| resource_schema(&mut set, info))
        .collect();
    let paths = paths(&resources, Dialect::V3);
    json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths,
        "components": {
            "schemas": set.finish(),
            "securitySchemes": security_v3(),
        },
        "security": [{ "BearerToken": [] }],
    })
}

/// Every v3 document and the index pointing at them by hash.
pub(super) fn v3(registry: &Registry) -> V3Documents {
    let mut by_path = std::collections::BTreeMap::new();
    for group in registry.groups() {
        for version in &group.versions {
            let doc = v3_group_version(registry, group.name, version);
            let bytes = serde_json::to_vec(&doc).unwrap_or_default();
            by_path.insert(gv_path(group.name, version), Document::new(bytes));
        }
    }
    let entries: Map<String, Value> = by_path
        .iter()
        .map(|(path, doc)| {
            (
                path.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={}", doc.hash) }),
            )
        })
        .collect();
    let index = serde_json::to_vec(&json!({ "paths": entries })).unwrap_or_default();
    V3Documents {
        index: Document::new(index),
        by_path,
    }
}

/// The v2 document of every served resource.
pub(super) fn v2(registry: &Registry) -> Value {
    let mut set = SchemaSet::new(Dialect::V2);
    let resources: Vec<ResourceSchema<'_>> = registry
        .resources()
        .iter()
        .filter_map(|info| resource_schema(&mut set, info))
        .collect();
    json!({
        "swagger": "2.0",
        "info": info(),
        "paths": paths(&resources, Dialect::V2),
        "definitions": set.finish(),
        "securityDefinitions": security_v3(),
        "security": [{ "BearerToken": [] }],
    })
}
