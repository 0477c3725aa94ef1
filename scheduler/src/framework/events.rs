//! Cluster events that can make an unschedulable pod schedulable.
//!
//! Each plugin declares which events could undo its rejections; the queue moves a parked
//! pod back only when such an event happens for one of the plugins that rejected it, and
//! that plugin's queueing hint, looking at the objects involved, says it could help.

use k8s_openapi::api::core::v1::{Node, Pod};

/// The kind of object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// A pod (assigned pods for Add/Delete; any pod for Update).
    Pod,
    /// A node.
    Node,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A PersistentVolume.
    PersistentVolume,
    /// A StorageClass.
    StorageClass,
    /// A namespace (label changes affect affinity namespace selectors).
    Namespace,
    /// Anything: used for the periodic flush and unknown changes.
    Wildcard,
}

/// Bit set of actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActionSet(pub u32);

impl ActionSet {
    /// Object added.
    pub const ADD: ActionSet = ActionSet(1);
    /// Object deleted.
    pub const DELETE: ActionSet = ActionSet(1 << 1);
    /// Node allocatable changed.
    pub const UPDATE_NODE_ALLOCATABLE: ActionSet = ActionSet(1 << 2);
    /// Node labels changed.
    pub const UPDATE_NODE_LABEL: ActionSet = ActionSet(1 << 3);
    /// Node taints or `unschedulable` changed.
    pub const UPDATE_NODE_TAINT: ActionSet = ActionSet(1 << 4);
    /// Node images or other status changed.
    pub const UPDATE_NODE_OTHER: ActionSet = ActionSet(1 << 5);
    /// Pod labels changed.
    pub const UPDATE_POD_LABEL: ActionSet = ActionSet(1 << 6);
    /// Pod resource requests scaled down.
    pub const UPDATE_POD_SCALE_DOWN: ActionSet = ActionSet(1 << 7);
    /// Any other update.
    pub const UPDATE_OTHER: ActionSet = ActionSet(1 << 8);
    /// Every update kind.
    pub const UPDATE: ActionSet =
        ActionSet((1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8));
    /// Everything.
    pub const ALL: ActionSet = ActionSet(u32::MAX);

    /// Union.
    pub const fn or(self, other: ActionSet) -> ActionSet {
        ActionSet(self.0 | other.0)
    }

    /// True if the sets share an action.
    pub fn intersects(self, other: ActionSet) -> bool {
        self.0 & other.0 != 0
    }
}

/// A cluster event: which resource, which action(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    /// Resource.
    pub resource: EventResource,
    /// Actions.
    pub actions: ActionSet,
}

impl ClusterEvent {
    /// A new event.
    pub const fn new(resource: EventResource, actions: ActionSet) -> Self {
        ClusterEvent { resource, actions }
    }

    /// True if an event that happened (`self`) is one a plugin registered (`interest`).
    pub fn matches(&self, interest: &ClusterEvent) -> bool {
        (self.resource == EventResource::Wildcard
            || interest.resource == EventResource::Wildcard
            || self.resource == interest.resource)
            && self.actions.intersects(interest.actions)
    }

    /// Unschedulable pods leftover for too long (moves everything).
    pub const UNSCHEDULABLE_TIMEOUT: ClusterEvent =
        ClusterEvent::new(EventResource::Wildcard, ActionSet::ALL);
    /// A node was added.
    pub const NODE_ADD: ClusterEvent = ClusterEvent::new(EventResource::Node, ActionSet::ADD);
    /// An assigned pod was deleted.
    pub const ASSIGNED_POD_DELETE: ClusterEvent =
        ClusterEvent::new(EventResource::Pod, ActionSet::DELETE);
    /// An assigned pod was added.
    pub const ASSIGNED_POD_ADD: ClusterEvent =
        ClusterEvent::new(EventResource::Pod, ActionSet::ADD);
    /// An assigned pod was added or deleted, or its labels changed: what can change
    /// the pods a label selector counts (inter-pod affinity, topology spread).
    pub const ASSIGNED_POD_ADD_DELETE_OR_LABEL_CHANGE: ClusterEvent = ClusterEvent::new(
        EventResource::Pod,
        ActionSet::ADD
            .or(ActionSet::DELETE)
            .or(ActionSet::UPDATE_POD_LABEL),
    );
    /// A node was added or its labels changed (node selectors, affinity, topology).
    pub const NODE_ADD_OR_LABEL_CHANGE: ClusterEvent = ClusterEvent::new(
        EventResource::Node,
        ActionSet::ADD.or(ActionSet::UPDATE_NODE_LABEL),
    );
    /// A node was added or its taints changed (`spec.unschedulable` counts as a taint).
    pub const NODE_ADD_OR_TAINT_CHANGE: ClusterEvent = ClusterEvent::new(
        EventResource::Node,
        ActionSet::ADD.or(ActionSet::UPDATE_NODE_TAINT),
    );

    /// An object of `resource` was added or updated in any way.
    pub const fn added_or_updated(resource: EventResource) -> Self {
        ClusterEvent::new(resource, ActionSet::ADD.or(ActionSet::UPDATE))
    }
}

/// The objects an event is about, handed to plugins' queueing hints.
#[derive(Debug, Clone, Copy, Default)]
pub enum EventObjects<'a> {
    /// Not known (periodic flushes, internal requeues): hints must say `Queue`.
    #[default]
    Unknown,
    /// A node added (`old` None), updated, or deleted (`new` None).
    Node {
        /// Before the change.
        old: Option<&'a Node>,
        /// After the change.
        new: Option<&'a Node>,
    },
    /// An assigned pod added (`old` None), updated, or deleted (`new` None).
    Pod {
        /// Before the change.
        old: Option<&'a Pod>,
        /// After the change.
        new: Option<&'a Pod>,
    },
}

/// A plugin's verdict on whether an event could make a pod it rejected schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// Retry the pod.
    Queue,
    /// The event cannot help this pod; leave it parked.
    Skip,
}

impl QueueingHint {
    /// `Queue` when `could_help`, else `Skip`.
    pub fn from_bool(could_help: bool) -> Self {
        if could_help {
            QueueingHint::Queue
        } else {
            QueueingHint::Skip
        }
    }

    /// The hint of a node event for a plugin that rejects nodes failing
    /// `fits`: only an added node that fits, or an updated one that fits now
    /// and did not before, can help. Other events queue.
    pub fn node_now_fits(objects: &EventObjects<'_>, fits: impl Fn(&Node) -> bool) -> Self {
        match objects {
            EventObjects::Node {
                old,
                new: Some(new),
            } => Self::from_bool(fits(new) && old.is_none_or(|o| !fits(o))),
            _ => QueueingHint::Queue,
        }
    }
}
