//! Plugin results: a code plus human-readable reasons, worded as upstream so
//! `kubectl describe pod` shows familiar messages.

use std::borrow::Cow;
use std::fmt;

/// The outcome class of a plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The plugin is satisfied.
    Success,
    /// An internal error; the pod is retried with backoff.
    Error,
    /// The node does not fit, but preemption might help.
    Unschedulable,
    /// The node does not fit and preemption cannot help.
    UnschedulableAndUnresolvable,
    /// Permit only: the pod waits for an allow/reject.
    Wait,
    /// PreFilter/PreScore only: the plugin has nothing to do for this pod.
    Skip,
}

/// A plugin's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    /// Mostly static texts: a rejection on thousands of nodes must not allocate a string
    /// per node.
    reasons: Vec<Cow<'static, str>>,
    plugin: Option<&'static str>,
}

impl Status {
    /// Success.
    pub fn success() -> Self {
        Status {
            code: Code::Success,
            reasons: Vec::new(),
            plugin: None,
        }
    }

    /// A status with a code and one reason.
    pub fn new(code: Code, reason: impl Into<Cow<'static, str>>) -> Self {
        Status {
            code,
            reasons: vec![reason.into()],
            plugin: None,
        }
    }

    /// A status with several reasons.
    pub fn with_reasons(code: Code, reasons: Vec<Cow<'static, str>>) -> Self {
        Status {
            code,
            reasons,
            plugin: None,
        }
    }

    /// Unschedulable with a reason.
    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    /// UnschedulableAndUnresolvable with a reason.
    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// An internal error.
    pub fn error(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(Code::Error, reason)
    }

    /// Skip.
    pub fn skip() -> Self {
        Status {
            code: Code::Skip,
            reasons: Vec::new(),
            plugin: None,
        }
    }

    /// Records which plugin produced the status.
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = Some(plugin);
        self
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons.
    pub fn reasons(&self) -> &[Cow<'static, str>] {
        &self.reasons
    }

    /// The plugin that produced this status, if recorded.
    pub fn plugin(&self) -> Option<&'static str> {
        self.plugin
    }

    /// True for Success.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// True for Skip.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// True for either unschedulable code.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }

    /// All reasons joined with ", ".
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message())
    }
}
