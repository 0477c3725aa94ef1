//! Which Ingresses are skiff's, and skiff's IngressClass.
//!
//! An Ingress is served when its `spec.ingressClassName` (or, failing that,
//! the legacy `kubernetes.io/ingress.class` annotation) names a class whose
//! `spec.controller` is skiff's. One with no class at all is served unless
//! another controller's class is the cluster's default: upstream's
//! DefaultIngressClass admission would have given it that class.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass, IngressClassSpec};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// The annotation marking the default IngressClass.
pub(crate) const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// The class annotation that preceded `spec.ingressClassName`.
pub(crate) const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Decides which Ingresses belong to this controller.
#[derive(Debug, Clone)]
pub struct ClassFilter {
    class_name: String,
    controller: String,
    ours: Vec<String>,
    other_default: bool,
}

impl ClassFilter {
    /// The filter for `controller`, given every IngressClass.
    pub fn new<'a>(
        class_name: &str,
        controller: &str,
        classes: impl IntoIterator<Item = &'a IngressClass>,
    ) -> Self {
        let mut ours = vec![class_name.to_owned()];
        let mut other_default = false;
        for class in classes {
            let name = class.metadata.name.clone().unwrap_or_default();
            let mine =
                class.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(controller);
            let default = class
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true");
            if mine {
                ours.push(name);
            } else {
                if name == class_name {
                    // A user gave skiff's class name to another controller.
                    ours.retain(|n| n != class_name);
                }
                other_default |= default;
            }
        }
        Self {
            class_name: class_name.to_owned(),
            controller: controller.to_owned(),
            ours,
            other_default,
        }
    }

    /// True when this controller serves `ingress`.
    pub fn serves(&self, ingress: &Ingress) -> bool {
        let named = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.clone())
            .or_else(|| {
                ingress
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(LEGACY_CLASS_ANNOTATION).cloned())
            });
        match named {
            Some(name) => self.ours.contains(&name),
            None => !self.other_default,
        }
    }

    /// The class this controller creates.
    pub fn class_name(&self) -> &str {
        &self.class_name
    }

    /// The controller name its classes carry.
    pub fn controller(&self) -> &str {
        &self.controller
    }
}

/// Creates the IngressClass `name` for `controller`, marked as the default
/// class, unless a class of that name exists (a user's edits stay).
pub(crate) async fn ensure_class(
    client: kube::Client,
    name: &str,
    controller: &str,
) -> Result<(), kube::Error> {
    let classes: Api<IngressClass> = Api::all(client);
    let class = IngressClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(BTreeMap::from([(
                DEFAULT_CLASS_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(IngressClassSpec {
            controller: Some(controller.to_owned()),
            parameters: None,
        }),
    };
    match classes.create(&PostParams::default(), &class).await {
        Ok(_) => {
            tracing::info!(%name, "IngressClass created as the default class");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(name: &str, controller: &str, default: bool) -> IngressClass {
        let mut class: IngressClass = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"controller": controller},
        }))
        .expect("IngressClass");
        if default {
            class.metadata.annotations = Some(BTreeMap::from([(
                DEFAULT_CLASS_ANNOTATION.to_owned(),
                "true".to_owned(),
            )]));
        }
        class
    }

    fn ingress(class: Option<&str>, annotation: Option<&str>) -> Ingress {
        let mut ingress: Ingress =
            serde_json::from_value(json!({"metadata": {"name": "i"}, "spec": {}}))
                .expect("Ingress");
        if let Some(spec) = ingress.spec.as_mut() {
            spec.ingress_class_name = class.map(str::to_owned);
        }
        if let Some(value) = annotation {
            ingress.metadata.annotations = Some(BTreeMap::from([(
                LEGACY_CLASS_ANNOTATION.to_owned(),
                value.to_owned(),
            )]));
        }
        ingress
    }

    const CONTROLLER: &str = "skiff.io/ingress";

    #[test]
    fn serves_its_classes_and_classless_ingresses() {
        let classes = [
            class("skiff", CONTROLLER, true),
            class("mine-too", CONTROLLER, false),
            class("nginx", "k8s.io/ingress-nginx", false),
        ];
        let filter = ClassFilter::new("skiff", CONTROLLER, &classes);
        assert!(filter.serves(&ingress(Some("skiff"), None)));
        assert!(filter.serves(&ingress(Some("mine-too"), None)));
        assert!(!filter.serves(&ingress(Some("nginx"), None)));
        assert!(!filter.serves(&ingress(Some("missing"), None)));
        assert!(filter.serves(&ingress(None, Some("skiff"))));
        assert!(!filter.serves(&ingress(None, Some("nginx"))));
        assert!(filter.serves(&ingress(None, None)));
    }

    #[test]
    fn classless_ingresses_go_to_another_default_class() {
        let classes = [
            class("skiff", CONTROLLER, false),
            class("nginx", "k8s.io/ingress-nginx", true),
        ];
        let filter = ClassFilter::new("skiff", CONTROLLER, &classes);
        assert!(!filter.serves(&ingress(None, None)));
        assert!(filter.serves(&ingress(Some("skiff"), None)));
    }

    #[test]
    fn its_class_name_taken_by_another_controller_is_not_served() {
        let classes = [class("skiff", "example.com/other", false)];
        let filter = ClassFilter::new("skiff", CONTROLLER, &classes);
        assert!(!filter.serves(&ingress(Some("skiff"), None)));
    }
}
