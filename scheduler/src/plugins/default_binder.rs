//! DefaultBinder: binds through the API (`pods/binding`) via the `Binder` service.

use std::sync::Arc;

use async_trait::async_trait;

use super::impl_plugin;
use crate::binding::Binder;
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub(crate) const NAME: &str = "DefaultBinder";

/// The DefaultBinder plugin.
pub(crate) struct DefaultBinder {
    binder: Arc<dyn Binder>,
}

/// Constructor for the registry.
pub(crate) fn new(_args: &serde_json::Value, s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(DefaultBinder {
        binder: s.binder.clone(),
    }))
}

impl_plugin! {
    DefaultBinder = NAME;
    views!(bind);
}

#[async_trait]
impl BindPlugin for DefaultBinder {
    async fn bind(&self, pod: &PodInfo, node: &str) -> Status {
        match self.binder.bind(&pod.pod, node).await {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e.to_string()),
        }
    }
}
