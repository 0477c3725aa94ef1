//! `storage.k8s.io`'s CSI kinds with columns of their own: CSIDrivers (what
//! the driver asks of kubelet), CSINodes (how many drivers a node has),
//! VolumeAttachments (which volume on which node, and whether it is
//! attached) and CSIStorageCapacities (a class's capacity; upstream prints
//! no AGE for them). StorageClasses are in `cluster.rs`.

use serde_json::Value;

use super::columns::{
    Column, Printer, canonical, flag, list, name, name_age_printer, one_column_printer, or_none,
    strings, text, text_cell,
};

/// CSIDrivers: `NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY
/// TOKENREQUESTS REQUIRESREPUBLISH MODES AGE`, unset flags at their defaults.
pub(crate) static CSIDRIVERS: Printer = name_age_printer!(
    [
        Column::boolean(
            "AttachRequired",
            "Whether volumes of the driver must be attached before they are mounted.",
        ),
        Column::boolean(
            "PodInfoOnMount",
            "Whether the driver is told about the pod when a volume is mounted.",
        ),
        Column::boolean(
            "StorageCapacity",
            "Whether the scheduler considers the driver's reported capacity.",
        ),
        Column::string(
            "TokenRequests",
            "The audiences of the service account tokens the driver is given.",
        ),
        Column::boolean(
            "RequiresRepublish",
            "Whether mounted volumes are republished periodically.",
        ),
        Column::string("Modes", "The volume lifecycle modes the driver supports.",),
    ],
    |driver, _| {
        // Stored objects lose an empty list, so it prints as unset too.
        let audiences: Vec<&str> = list(driver, "spec/tokenRequests")
            .iter()
            .filter_map(|t| text(t, "audience"))
            .collect();
        let token_requests = if audiences.is_empty() {
            "<unset>".to_string()
        } else {
            audiences.join(",")
        };
        vec![
            Value::from(flag(driver, "spec/attachRequired", true)),
            Value::from(flag(driver, "spec/podInfoOnMount", false)),
            Value::from(flag(driver, "spec/storageCapacity", false)),
            Value::from(token_requests),
            Value::from(flag(driver, "spec/requiresRepublish", false)),
            or_none(strings(driver, "spec/volumeLifecycleModes").join(",")),
        ]
    },
);

/// CSINodes: `NAME DRIVERS AGE`, the drivers counted.
pub(crate) static CSINODES: Printer = one_column_printer!(
    Column::integer(
        "Drivers",
        "How many CSI drivers are registered on the node.",
    ),
    |node| Value::from(list(node, "spec/drivers").len()),
);

/// VolumeAttachments: `NAME ATTACHER PV NODE ATTACHED AGE`.
pub(crate) static VOLUMEATTACHMENTS: Printer = name_age_printer!(
    [
        // Upstream marks this column as a name too; kubectl takes the first.
        Column {
            format: "name",
            ..Column::string("Attacher", "The volume driver that attaches the volume.")
        },
        Column::string(
            "PV",
            "The persistent volume attached, if the source is one.",
        ),
        Column::string("Node", "The node the volume is attached to."),
        Column::boolean(
            "Attached",
            "Whether the attacher reports the volume attached.",
        ),
    ],
    |attachment, _| {
        vec![
            text_cell(attachment, "spec/attacher", ""),
            text_cell(attachment, "spec/source/persistentVolumeName", ""),
            text_cell(attachment, "spec/nodeName", ""),
            Value::from(flag(attachment, "status/attached", false)),
        ]
    },
);

/// CSIStorageCapacities: `NAME STORAGECLASSNAME CAPACITY` (no AGE, as
/// upstream prints them).
pub(crate) static CSISTORAGECAPACITIES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string(
            "StorageClassName",
            "The storage class the capacity is reported for.",
        ),
        Column::string(
            "Capacity",
            "The capacity available to new volumes of the class.",
        ),
    ],
    cells: |capacity, _| {
        vec![
            name(capacity),
            text_cell(capacity, "storageClassName", ""),
            Value::from(text(capacity, "capacity").map_or_else(|| "<unset>".into(), canonical)),
        ]
    },
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::test_now as now;

    #[test]
    fn a_driver_prints_its_flags_at_their_defaults() {
        let driver = json!({"metadata": {"name": "csi.example.com"}, "spec": {}});
        assert_eq!(
            (CSIDRIVERS.cells)(&driver, now())[1..7],
            [
                json!(true),
                json!(false),
                json!(false),
                json!("<unset>"),
                json!(false),
                json!("<none>")
            ]
        );
        let driver = json!({"metadata": {"name": "csi.example.com"}, "spec": {
            "attachRequired": false, "podInfoOnMount": true,
            "tokenRequests": [{"audience": "vault"}, {"audience": "gcp"}],
            "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        let cells = (CSIDRIVERS.cells)(&driver, now());
        assert_eq!(cells[1..3], [json!(false), json!(true)]);
        assert_eq!(cells[4], "vault,gcp");
        assert_eq!(cells[6], "Persistent,Ephemeral");
    }

    #[test]
    fn capacity_prints_in_canonical_form_or_unset() {
        let capacity = json!({"metadata": {"name": "c"}, "storageClassName": "fast",
            "capacity": "1024Mi"});
        assert_eq!(
            (CSISTORAGECAPACITIES.cells)(&capacity, now()),
            [json!("c"), json!("fast"), json!("1Gi")]
        );
        let unknown = json!({"metadata": {"name": "c"}, "storageClassName": "fast"});
        assert_eq!((CSISTORAGECAPACITIES.cells)(&unknown, now())[2], "<unset>");
    }
}
