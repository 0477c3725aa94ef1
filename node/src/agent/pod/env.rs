//! A container's environment as upstream builds it: `envFrom` sources first,
//! then `env` entries in order (later entries override and may refer to
//! earlier ones with `$(VAR)`), values from the pod's own fields, its
//! resources, ConfigMaps and Secrets; then the service variables it did
//! not set itself.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVarSource, Pod, Secret};
use kube::Api;

use super::downward;
use super::expand::expand;

/// Why the environment could not be built (`CreateContainerConfigError`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EnvError {
    /// A referenced ConfigMap or Secret is missing.
    #[error("{kind} {name:?} {what}")]
    Missing {
        /// `configmap` or `secret`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// What is missing (`not found`).
        what: String,
    },
    /// A key an env var names is not in its ConfigMap or Secret (upstream's
    /// words: `couldn't find key k in ConfigMap ns/name`).
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// The pod's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The key.
        key: String,
    },
    /// Reading a ConfigMap or Secret failed.
    #[error("reading {kind} {name:?}: {source}")]
    Api {
        /// `configmap` or `secret`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// A field or resource reference is not supported.
    #[error(transparent)]
    Field(#[from] downward::FieldError),
}

/// What the environment may refer to besides the API.
pub(crate) struct EnvContext<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The node's address (`status.hostIP`).
    pub host_ip: &'a str,
    /// The pod's address (`status.podIP`).
    pub pod_ip: &'a str,
    /// Node allocatable, the default for unset limits.
    pub allocatable: &'a downward::NodeAllocatable,
    /// The pod's service variables ([`super::service_env`]): added after
    /// the container's own, which they never override, and known to its
    /// `$(VAR)` references.
    pub services: &'a BTreeMap<String, String>,
}

/// Builds the environment of `container`, in order.
pub(crate) async fn resolve(
    client: &kube::Client,
    ctx: &EnvContext<'_>,
    container: &Container,
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = ctx.pod.metadata.namespace.as_deref().unwrap_or("default");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| match env
        .iter_mut()
        .find(|(n, _)| *n == name)
    {
        Some(entry) => entry.1 = value,
        None => env.push((name, value)),
    };

    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        let data = if let Some(cm) = &source.config_map_ref {
            config_map_data(&configmaps, &cm.name, cm.optional.unwrap_or(false)).await?
        } else if let Some(s) = &source.secret_ref {
            secret_data(&secrets, &s.name, s.optional.unwrap_or(false)).await?
        } else {
            None
        };
        for (key, value) in data.unwrap_or_default() {
            set(&mut env, format!("{prefix}{key}"), value);
        }
    }

    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            Some(source) => {
                match value_from(&configmaps, &secrets, ctx, container, source).await? {
                    Some(v) => v,
                    None => continue,
                }
            }
            None => {
                let raw = var.value.clone().unwrap_or_default();
                let known = env.clone();
                expand(&raw, |name| {
                    known
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .or_else(|| ctx.services.get(name).cloned())
                })
            }
        };
        set(&mut env, var.name.clone(), value);
    }
    for (name, value) in ctx.services {
        if !env.iter().any(|(n, _)| n == name) {
            env.push((name.clone(), value.clone()));
        }
    }
    Ok(env)
}

async fn value_from(
    configmaps: &Api<ConfigMap>,
    secrets: &Api<Secret>,
    ctx: &EnvContext<'_>,
    container: &Container,
    source: &EnvVarSource,
) -> Result<Option<String>, EnvError> {
    if let Some(field) = &source.field_ref {
        let value = downward::field_value(ctx.pod, &field.field_path, ctx.host_ip, ctx.pod_ip)?;
        return Ok(Some(value));
    }
    if let Some(resource) = &source.resource_field_ref {
        let target = match &resource.container_name {
            Some(name) if !name.is_empty() => ctx
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| &c.name == name))
                .unwrap_or(container),
            _ => container,
        };
        return Ok(Some(downward::resource_value(
            target,
            resource,
            ctx.allocatable,
        )?));
    }
    if let Some(key_ref) = &source.config_map_key_ref {
        let optional = key_ref.optional.unwrap_or(false);
        let data = config_map_data(configmaps, &key_ref.name, optional).await?;
        let named = Named::in_pod(ctx, "ConfigMap", &key_ref.name);
        return pick(&named, &key_ref.key, data, optional);
    }
    if let Some(key_ref) = &source.secret_key_ref {
        let optional = key_ref.optional.unwrap_or(false);
        let data = secret_data(secrets, &key_ref.name, optional).await?;
        let named = Named::in_pod(ctx, "Secret", &key_ref.name);
        return pick(&named, &key_ref.key, data, optional);
    }
    Ok(None)
}

/// The ConfigMap or Secret an env var takes a key of.
struct Named<'a> {
    /// `ConfigMap` or `Secret`.
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
}

impl<'a> Named<'a> {
    /// The `kind` named `name` in the pod's namespace, where its ConfigMaps
    /// and Secrets are.
    fn in_pod(ctx: &EnvContext<'a>, kind: &'static str, name: &'a str) -> Self {
        Named {
            kind,
            namespace: ctx.pod.metadata.namespace.as_deref().unwrap_or("default"),
            name,
        }
    }
}

fn pick(
    named: &Named<'_>,
    key: &str,
    data: Option<BTreeMap<String, String>>,
    optional: bool,
) -> Result<Option<String>, EnvError> {
    match data.and_then(|mut d| d.remove(key)) {
        Some(v) => Ok(Some(v)),
        None if optional => Ok(None),
        None => Err(EnvError::MissingKey {
            kind: named.kind,
            namespace: named.namespace.to_string(),
            name: named.name.to_string(),
            key: key.to_string(),
        }),
    }
}

/// A ConfigMap's data (binary data as lossy text); `None` when it is absent
/// and optional.
pub(crate) async fn config_map_data(
    api: &Api<ConfigMap>,
    name: &str,
    optional: bool,
) -> Result<Option<BTreeMap<String, String>>, EnvError> {
    let Some(cm) = get_source(api, "configmap", name, optional).await? else {
        return Ok(None);
    };
    let mut data = cm.data.unwrap_or_default();
    for (k, v) in cm.binary_data.unwrap_or_default() {
        data.insert(k, String::from_utf8_lossy(&v.0).into_owned());
    }
    Ok(Some(data))
}

/// A Secret's data as text; `None` when it is absent and optional.
pub(crate) async fn secret_data(
    api: &Api<Secret>,
    name: &str,
    optional: bool,
) -> Result<Option<BTreeMap<String, String>>, EnvError> {
    secret_bytes(api, name, optional).await.map(|d| {
        d.map(|d| {
            d.into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                .collect()
        })
    })
}

/// A Secret's data (`stringData` is merged by the API server); `None` when
/// it is absent and optional.
pub(crate) async fn secret_bytes(
    api: &Api<Secret>,
    name: &str,
    optional: bool,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
    let Some(secret) = get_source(api, "secret", name, optional).await? else {
        return Ok(None);
    };
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in secret.string_data.unwrap_or_default() {
        data.insert(k, v.into_bytes());
    }
    Ok(Some(data))
}

/// The `kind` object `name` that an env source or volume names, read the same way
/// for ConfigMaps and Secrets: `None` when it is absent and `optional`, `Missing`
/// when it is absent and required, `Api` when it could not be read.
async fn get_source<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
    optional: bool,
) -> Result<Option<K>, EnvError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(Some(object)),
        Ok(None) if optional => Ok(None),
        Ok(None) => Err(EnvError::Missing {
            kind,
            name: name.to_string(),
            what: "not found".to_string(),
        }),
        Err(source) => Err(EnvError::Api {
            kind,
            name: name.to_string(),
            source,
        }),
    }
}

/// Expands `$(VAR)` in a command or args list with the container's env.
pub(crate) fn expand_args(args: &[String], env: &[(String, String)]) -> Vec<String> {
    args.iter()
        .map(|a| {
            expand(a, |name| {
                env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
            })
        })
        .collect()
}

/// A mount's `subPathExpr` with `$(VAR)` taken from the container's env;
/// as upstream, a variable that is unset or empty is an error naming it.
pub(crate) fn expand_sub_path(expr: &str, env: &[(String, String)]) -> Result<String, String> {
    let missing = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let expanded = expand(expr, |name| {
        let value = env
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if value.is_empty() {
            missing.borrow_mut().insert(name.to_string());
        }
        Some(value)
    });
    let missing = missing.into_inner();
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(format!(
            "missing value for {}",
            missing.into_iter().collect::<Vec<_>>().join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_see_the_final_environment() {
        let env = vec![
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "two".to_string()),
        ];
        let args = vec!["echo".to_string(), "$(A)-$(B)-$(C)".to_string()];
        assert_eq!(expand_args(&args, &env), ["echo", "1-two-$(C)"]);
    }

    #[test]
    fn a_sub_path_expression_needs_every_variable_it_names() {
        let env = vec![
            ("POD_NAME".to_string(), "web-0".to_string()),
            ("EMPTY".to_string(), String::new()),
        ];
        assert_eq!(
            expand_sub_path("logs/$(POD_NAME)", &env).unwrap(),
            "logs/web-0"
        );
        assert_eq!(
            expand_sub_path("$(NOPE)/$(EMPTY)/$(POD_NAME)", &env).unwrap_err(),
            "missing value for EMPTY, NOPE"
        );
    }

    #[test]
    fn a_missing_key_is_named_as_upstream_names_it() {
        let data = BTreeMap::from([("there".to_string(), "v".to_string())]);
        let named = Named {
            kind: "ConfigMap",
            namespace: "apps",
            name: "settings",
        };
        assert_eq!(
            pick(&named, "there", Some(data.clone()), false).ok(),
            Some(Some("v".to_string()))
        );
        assert_eq!(
            pick(&named, "gone", Some(data.clone()), true).ok(),
            Some(None)
        );
        let missing = pick(&named, "gone", Some(data), false).map_err(|e| e.to_string());
        assert_eq!(
            missing,
            Err("couldn't find key gone in ConfigMap apps/settings".to_string())
        );
        let secret = Named {
            kind: "Secret",
            ..named
        };
        let missing = pick(&secret, "k", None, false).map_err(|e| e.to_string());
        assert_eq!(
            missing,
            Err("couldn't find key k in Secret apps/settings".to_string())
        );
    }
}
