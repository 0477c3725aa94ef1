//! NodeMetrics and PodMetrics, printed with the figures `kubectl top`
//! shows and the window they were measured over.

use serde_json::Value;

use super::columns::{Column, Printer, name, text_cell};

const CPU: Column = Column::string("CPU", "CPU usage over the window");
const MEMORY: Column = Column::string("Memory", "Working set at the end of the window");
const WINDOW: Column = Column::string("Window", "What the CPU usage was measured over");

pub(crate) static NODE_METRICS: Printer = Printer {
    columns: &[Column::NAME, CPU, MEMORY, WINDOW],
    cells: |metrics, _| {
        vec![
            name(metrics),
            text_cell(metrics, "usage/cpu", ""),
            text_cell(metrics, "usage/memory", ""),
            text_cell(metrics, "window", ""),
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
            text_cell(metrics, "window", ""),
        ]
    },
};
