//! Log setup: tracing to stderr, filtered by `RUST_LOG` (default `info`),
//! as text or as JSON lines.

use tracing_subscriber::EnvFilter;

use super::plain::{PlainFields, PlainLine};
use crate::config::LogFormat;

/// Installs the log subscriber once, writing to stderr; later calls do nothing.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // Colours only for a person at a terminal, not in files or CI logs,
        // which get the same line written plainly (plain.rs).
        LogFormat::Text if std::io::IsTerminal::is_terminal(&std::io::stderr()) => {
            builder.with_target(false).try_init()
        }
        LogFormat::Text => builder
            .fmt_fields(PlainFields)
            .event_format(PlainLine)
            .try_init(),
        // One object per line: the event's fields at the top level, the
        // request span's fields (request_id, route, trace_id) under "span".
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}
