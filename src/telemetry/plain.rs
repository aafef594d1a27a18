//! The text log line without colours, written straight to the line: what
//! `tracing_subscriber`'s default (`Full`) format writes with colours off,
//! without paying for the colours it does not write.
//!
//! With colours off, the default format still wraps every field name, `=`,
//! span name and brace in a style that writes nothing, which cost more than
//! the rest of the line (issue 37's profile: about a quarter of baton's own
//! instructions per uncontended cycle went to the two audit lines). Here the
//! same line is written plainly:
//!
//! ```text
//! 2026-11-28T05:00:00.123456Z  INFO request{method=POST route=/locks/{name} request_id=9f…}: audit event="acquired" kind="lock" name="deploy" fencing_token=7
//! ```
//!
//! A person at a terminal keeps the coloured default (`logs.rs`).

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// A line: the time, the level, each span of the event's scope with its
/// fields, then the event's fields, the message first.
#[derive(Debug, Default, Clone, Copy)]
pub struct PlainLine;

impl<S, N> FormatEvent<S, N> for PlainLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        SystemTime.format_time(&mut writer)?;
        writer.write_str(level(event.metadata().level()))?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(writer, "{{{fields}}}")?;
                    }
                }
                writer.write_char(':')?;
            }
            writer.write_char(' ')?;
        }
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}

/// The level as the default format writes it: padded to five, a space on
/// each side.
fn level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => " TRACE ",
        Level::DEBUG => " DEBUG ",
        Level::INFO => "  INFO ",
        Level::WARN => "  WARN ",
        Level::ERROR => " ERROR ",
    }
}

/// Fields as `name=value` (values as `Debug` shows them: strings quoted and
/// escaped), separated by spaces; the message as its text, with what could
/// start a terminal's escape sequence escaped.
#[derive(Debug, Default, Clone, Copy)]
pub struct PlainFields;

impl<'writer> FormatFields<'writer> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = Visitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Visitor<'writer> {
    writer: Writer<'writer>,
    first: bool,
    result: fmt::Result,
}

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        if name.starts_with("log.") {
            return;
        }
        let separator = if std::mem::take(&mut self.first) {
            ""
        } else {
            " "
        };
        self.result = match name {
            "message" => self
                .writer
                .write_str(separator)
                .and_then(|()| write!(Escaped(&mut self.writer), "{value:?}")),
            name => {
                let name = name.strip_prefix("r#").unwrap_or(name);
                write!(self.writer, "{separator}{name}={value:?}")
            }
        };
    }
}

/// A writer that escapes, as the default format does, the characters that
/// can start a terminal's escape sequence (ESC, BEL, BS, FF, DEL and the C1
/// controls).
struct Escaped<'a, 'writer>(&'a mut Writer<'writer>);

impl fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let risky = |c: char| {
            matches!(
                c,
                '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' | '\u{80}'..='\u{9f}'
            )
        };
        if !s.contains(risky) {
            return self.0.write_str(s);
        }
        for c in s.chars() {
            match c {
                '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' => {
                    write!(self.0, "\\x{:02x}", c as u32)?
                }
                c if risky(c) => write!(self.0, "\\u{{{:x}}}", c as u32)?,
                c => self.0.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Self;
        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    /// What one event inside a span writes, with the default format (colours
    /// off) and with this one, the time cut off.
    fn lines() -> (String, String) {
        let emit = || {
            let span = tracing::info_span!(
                "request",
                method = "POST",
                route = tracing::field::Empty,
                request_id = "r1"
            );
            span.record("route", "/locks/{name}");
            let _in = span.enter();
            tracing::info!(
                event = "acquired",
                name = "deploy",
                owner = Some("ci \u{1b}[31m"),
                fencing_token = 7_u64,
                more = tracing::field::Empty,
                "audit"
            );
            tracing::warn!(answer = %"503 Service Unavailable", "request \u{1b}[2Jfailed");
        };
        let default = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(default.clone())
            .with_target(false)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let plain = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(plain.clone())
            .fmt_fields(PlainFields)
            .event_format(PlainLine)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let text = |c: Captured| {
            String::from_utf8(c.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(|l| l.split_once('Z').map_or(l, |(_, rest)| rest).to_owned())
                .collect::<Vec<_>>()
                .join("\n")
        };
        (text(default), text(plain))
    }

    #[test]
    fn a_plain_line_is_the_default_line_without_colours() {
        let (default, plain) = lines();
        assert_eq!(plain, default);
        assert!(plain.starts_with(
            "  INFO request{method=\"POST\" request_id=\"r1\" route=\"/locks/{name}\"}: audit event=\"acquired\""
        ), "{plain}");
        assert!(!plain.contains('\u{1b}'), "{plain}");
    }
}
