//! Cluster-wide settings with columns of their own: StorageClasses
//! (`NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION
//! AGE`, the default one marked `(default)`), PriorityClasses (`NAME
//! VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY`) and RuntimeClasses (`NAME
//! HANDLER AGE`).

use serde_json::Value;

use super::columns::{Column, Printer, age, flag, int, name, one_column_printer, text, text_cell};

pub(crate) static STORAGECLASSES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string(
            "Provisioner",
            "The driver that provisions volumes of this class.",
        ),
        Column::string(
            "ReclaimPolicy",
            "What becomes of a provisioned volume once released.",
        ),
        Column::string(
            "VolumeBindingMode",
            "When volumes of this class are bound and provisioned.",
        ),
        Column::string(
            "AllowVolumeExpansion",
            "Whether claims of this class may grow.",
        ),
        Column::AGE,
    ],
    cells: |class, now| {
        let default = [
            "storageclass.kubernetes.io",
            "storageclass.beta.kubernetes.io",
        ]
        .iter()
        .any(|prefix| {
            class
                .pointer(&format!("/metadata/annotations/{prefix}~1is-default-class"))
                .and_then(Value::as_str)
                == Some("true")
        });
        let mut shown = text(class, "metadata/name").unwrap_or("").to_string();
        if default {
            shown.push_str(" (default)");
        }
        vec![
            Value::from(shown),
            text_cell(class, "provisioner", ""),
            text_cell(class, "reclaimPolicy", "Delete"),
            text_cell(class, "volumeBindingMode", "Immediate"),
            Value::from(flag(class, "allowVolumeExpansion", false)),
            age(class, now),
        ]
    },
};

pub(crate) static PRIORITYCLASSES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::integer("Value", "The priority of pods of this class."),
        Column::boolean(
            "Global-Default",
            "Whether pods without a class get this one.",
        ),
        Column::AGE,
        Column::string(
            "PreemptionPolicy",
            "Whether pods of this class may preempt lower-priority ones.",
        ),
    ],
    cells: |class, now| {
        vec![
            name(class),
            Value::from(int(class, "value")),
            Value::from(flag(class, "globalDefault", false)),
            age(class, now),
            text_cell(class, "preemptionPolicy", "PreemptLowerPriority"),
        ]
    },
};

/// RuntimeClasses: `NAME HANDLER AGE`.
pub(crate) static RUNTIMECLASSES: Printer = one_column_printer!(
    Column::string(
        "Handler",
        "The CRI runtime handler the class's pods run under.",
    ),
    |class| text_cell(class, "handler", ""),
);
