//! Stretches of time and the faults over them, as every rule reads them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::checker::limits::LEAVE;
use crate::checker::Hold;
use crate::history::{Answer, Call, History, Target};

pub(crate) fn overlaps(a: (SystemTime, SystemTime), b: (SystemTime, SystemTime)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Sorted, disjoint stretches covering the same time as `spans`.
pub(crate) fn union(mut spans: Vec<(SystemTime, SystemTime)>) -> Vec<(SystemTime, SystemTime)> {
    spans.retain(|s| s.1 > s.0);
    spans.sort();
    let mut out: Vec<(SystemTime, SystemTime)> = Vec::new();
    for s in spans {
        match out.last_mut() {
            Some(last) if s.0 <= last.1 => last.1 = last.1.max(s.1),
            _ => out.push(s),
        }
    }
    out
}

/// `spans` less `minus` (both sorted and disjoint).
pub(crate) fn subtract(
    spans: &[(SystemTime, SystemTime)],
    minus: &[(SystemTime, SystemTime)],
) -> Vec<(SystemTime, SystemTime)> {
    let mut out = Vec::new();
    for &(mut from, to) in spans {
        for &(m0, m1) in minus {
            if m1 <= from || m0 >= to {
                continue;
            }
            if m0 > from {
                out.push((from, m0));
            }
            from = from.max(m1);
            if from >= to {
                break;
            }
        }
        if from < to {
            out.push((from, to));
        }
    }
    out
}

/// Whether a fault of `instance` or of Redis touches `from .. to`, widened
/// by `before` and `after`.
pub(crate) fn faulted(
    history: &History,
    instance: usize,
    (from, to): (SystemTime, SystemTime),
    before: Duration,
    after: Duration,
) -> bool {
    history.faults.iter().any(|f| {
        matches!(f.target, Target::Redis) || f.target == Target::Instance(instance)
    } && f.from <= to + before
        && from <= f.to + after)
}

/// Whether a fault of `instance` itself (not of Redis) touches `from .. to`.
pub(crate) fn instance_faulted(
    history: &History,
    instance: usize,
    (from, to): (SystemTime, SystemTime),
) -> bool {
    history
        .faults
        .iter()
        .any(|f| f.target == Target::Instance(instance) && f.from <= to && from <= f.to)
}

/// Until when a call may still take effect: its answer, or for one
/// unanswered or answered 503 a while after (a paused instance serves it
/// when it resumes, a stalled Redis runs it when it wakes).
pub(crate) fn effect_until(call: &Call) -> SystemTime {
    match call.answer {
        Answer::None { .. } | Answer::Status { status: 503, .. } => call.answered + LEAVE,
        _ => call.answered,
    }
}

/// How much of a name `holds` take, by `until` (told or may), at each time
/// that changes: (when, in use from then on). Holds that touch do not
/// overlap.
pub(crate) fn usage(holds: &[Hold], until: impl Fn(&Hold) -> SystemTime) -> Vec<(SystemTime, i64)> {
    let mut changes: BTreeMap<SystemTime, i64> = BTreeMap::new();
    for h in holds {
        if until(h) > h.start {
            let weight = h.ask.weight() as i64;
            *changes.entry(h.start).or_default() += weight;
            *changes.entry(until(h)).or_default() -= weight;
        }
    }
    let mut used = 0;
    changes
        .into_iter()
        .map(|(at, delta)| {
            used += delta;
            (at, used)
        })
        .collect()
}

/// The token a call's answer carries, if any.
pub(crate) fn call_token(call: &Call) -> Option<u64> {
    match call.answer {
        Answer::Lease { token, .. } => Some(token),
        _ => None,
    }
}
