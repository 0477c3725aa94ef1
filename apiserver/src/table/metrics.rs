//! NodeMetrics and PodMetrics, printed with the figures `kubectl top`
//! shows and the window they were measured over.

use serde_json::Value;

use super::columns::{Column, Printer, name, text};

const CPU: Column = Column::new("CPU", "string", "CPU usage over the window");
const MEMORY: Column = Column::new("Memory", "string", "Working set at the end of the window");
const WINDOW: Column = Column::new("Window", "string", "What the CPU usage was measured over");

pub(crate) static NODE_METRICS: Printer = Printer {
    columns: &[Column::NAME, CPU, MEMORY, WINDOW],
    cells: |metrics, _| {
        vec![
            name(metrics),
            Value::from(text(metrics, "usage/cpu").unwrap_or("")),
            Value::from(text(metrics, "usage/memory").unwrap_or("")),
            Value::from(text(metrics, "window").unwrap_or("")),
        ]
    },
};

pub(crate) static POD_METRICS: Printer = Printer {
    columns: &[Column::NAME, CPU, MEMORY, WINDOW],
    cells: |metrics, _| {
        let (cpu, memory) = crate::resource_metrics::pod_totals(metrics);
        vec![
            name(metrics),
            Value::from(cpu),
            Value::from(memory),
            Value::from(text(metrics, "window").unwrap_or("")),
        ]
    },
};
