//! Tokens: every token granted once, above every token told before it was
//! asked.

use std::collections::HashSet;

use crate::checker::{Hold, Rule, Verdict};
use crate::history::when;

/// Every token granted once, and above the tokens of every hold (of either
/// mode) whose 201 had arrived before it was asked for (across Redis
/// restarts, data loss and failovers too).
pub(crate) fn tokens(name: &str, holds: &[Hold], verdict: &mut Verdict) {
    let mut seen = HashSet::new();
    for h in holds {
        if !seen.insert(h.token) {
            verdict.flag(
                Rule::Tokens,
                format!("{name}: token {} granted twice", h.token),
            );
        }
    }
    let mut by_start = holds.to_vec();
    by_start.sort_by_key(|h| h.start);
    let mut by_request = holds.to_vec();
    by_request.sort_by_key(|h| h.requested);
    let mut max_told: Option<&Hold> = None;
    let mut j = 0;
    for h in &by_request {
        while j < by_start.len() && by_start[j].start < h.requested {
            if max_told.is_none_or(|m| by_start[j].token > m.token) {
                max_told = Some(&by_start[j]);
            }
            j += 1;
        }
        if let Some(m) = max_told.filter(|m| h.token <= m.token) {
            verdict.flag(
                Rule::Tokens,
                format!(
                    "{name}: token {} ({}, sent {}) after token {} ({}, told {})",
                    h.token,
                    h.ask,
                    when(h.requested),
                    m.token,
                    m.ask,
                    when(m.start)
                ),
            );
        }
    }
}
