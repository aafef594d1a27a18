//! The timeline printed around a violation: the faults, holds and calls of
//! one name.

use std::time::{Duration, SystemTime};

use crate::checker::Hold;
use crate::history::{when, History};

/// What the clients saw of `name` around `from` .. `to`: the faults, the
/// holds and the acquisitions that touched it, each time in milliseconds
/// from `from`.
pub(crate) fn timeline(
    history: &History,
    holds: &[Hold],
    name: &str,
    from: SystemTime,
    to: SystemTime,
) -> String {
    let margin = Duration::from_secs(3);
    let (lo, hi) = (from - margin, to + margin);
    let ms = |t: SystemTime| match t.duration_since(from) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    };
    let mut rows: Vec<(SystemTime, String)> = Vec::new();
    for f in history.faults.iter().filter(|f| f.to >= lo && f.from <= hi) {
        rows.push((
            f.from,
            format!(
                "fault {:?} {}: {} .. {}",
                f.target,
                f.kind,
                ms(f.from),
                ms(f.to)
            ),
        ));
    }
    for h in holds
        .iter()
        .filter(|h| h.may_until >= lo && h.requested <= hi)
    {
        rows.push((
            h.start,
            format!(
                "hold token {} {}: sent {}, 201 {}, told until {}, may until {}",
                h.token,
                h.ask,
                ms(h.requested),
                ms(h.start),
                ms(h.told_until),
                ms(h.may_until)
            ),
        ));
    }
    for c in history
        .calls
        .iter()
        .filter(|c| c.name == name && c.answered >= lo && c.sent <= hi)
    {
        rows.push((
            c.sent,
            format!(
                "{:?} via instance {}: sent {}, answered {} {}",
                c.op,
                c.instance,
                ms(c.sent),
                ms(c.answered),
                c.answer
            ),
        ));
    }
    rows.sort_by_key(|(t, _)| *t);
    let mut out = format!("{name} from {} (= 0 ms) to {}:", when(from), when(to));
    for (_, row) in rows {
        out.push_str("\n    ");
        out.push_str(&row);
    }
    out
}
