//! PodDisruptionBudget accounting for victim selection.

use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::pod_info::PodInfo;
use crate::selectors::Selector;

/// Splits victims into (violating, non-violating) PDBs, consuming each PDB's allowed
/// disruptions in order. A PDB with an empty selector matches nothing here, as upstream.
pub(crate) fn split_by_pdb(
    victims: &[Arc<PodInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i64> = pdbs
        .iter()
        .map(|p| i64::from(p.status.as_ref().map_or(0, |s| s.disruptions_allowed)))
        .collect();
    let selectors: Vec<Option<Selector>> = pdbs
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .filter(|s| {
                    s.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                        || s.match_expressions.as_ref().is_some_and(|m| !m.is_empty())
                })
                .map(Selector::from_label_selector)
        })
        .collect();
    let (mut violating, mut ok) = (Vec::new(), Vec::new());
    for v in victims {
        let mut violates = false;
        for (i, pdb) in pdbs.iter().enumerate() {
            if pdb.metadata.namespace.as_deref().unwrap_or("default") != v.namespace {
                continue;
            }
            let Some(sel) = &selectors[i] else { continue };
            if !sel.matches(v.labels()) {
                continue;
            }
            // Pods the disruption controller already counts as disrupted do not consume
            // the budget again.
            let already = pdb
                .status
                .as_ref()
                .and_then(|s| s.disrupted_pods.as_ref())
                .is_some_and(|d| d.contains_key(&v.name));
            if already {
                continue;
            }
            allowed[i] -= 1;
            if allowed[i] < 0 {
                violates = true;
            }
        }
        if violates {
            violating.push(v.clone())
        } else {
            ok.push(v.clone())
        }
    }
    (violating, ok)
}
