//! Paged listings: the locks and semaphores held or with waiters (a free
//! name with a queue behind a freeze too), whose names start with a prefix, a
//! page at a time.
//!
//! Names are found with `SCAN MATCH … COUNT … TYPE hash` over the names'
//! owners hashes (`functions/core/state.lua`: a name's only lease lives there, as
//! every lease's details do) (never `KEYS`), a bounded
//! number of SCAN calls per page, then one status script per name found, at
//! most [`STATUS_CALLS_IN_FLIGHT`] at once on the multiplexed connection
//! (which pipelines them). So a page costs Redis a bounded amount of work,
//! however many names exist.
//!
//! On a cluster every master is scanned in turn (the store's [`Store::nodes`],
//! in a stable order). The cursor handed to the client is the node's index and
//! SCAN's own cursor on it, plus the last name returned when a page ended
//! inside one SCAN batch: the next page repeats that batch and skips the names
//! up to it. A lock that stays held for the whole listing is therefore listed
//! once: SCAN visits it in exactly one batch (as long as Redis does not shrink
//! its hash table meanwhile, when SCAN itself may return a key twice), and
//! within a batch names are taken in order.
//!
//! [`Store::nodes`]: crate::engine::connection::Store::nodes

use futures_util::stream::{self, StreamExt, TryStreamExt};

use super::operations::Leases;
use crate::domain::{Invalid, Name, NamePrefix};
use crate::engine::error::Error;
use crate::engine::handle::Engine;
use crate::engine::model::{Page, PageSize, Status};

/// Status scripts run at once for one page.
const STATUS_CALLS_IN_FLIGHT: usize = 64;
/// SCAN calls one page may make before it answers with what it found (fewer
/// than `limit` entries, and a cursor) when matching keys are sparse among
/// many others. Each call visits about [`SCAN_COUNT`] buckets: well under a
/// millisecond of Redis's time.
const SCANS_PER_PAGE: usize = 64;
/// Rounds of finding names and reading their status one page may take to
/// fill itself when names without holders are found.
const FILL_ROUNDS: usize = 4;
/// The COUNT of each SCAN: buckets of the keyspace visited per call.
const SCAN_COUNT: usize = 1000;

/// How many entries one page of a listing may hold: 1 to 1000, 100 by
/// default.
pub type PageLimit = PageSize<1000, 100>;

/// Where the next page starts: opaque to clients, `NODE-SCAN_CURSOR` or
/// `NODE-SCAN_CURSOR.HEX_OF_LAST_NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageCursor {
    node: usize,
    scan: u64,
    after: Option<Name>,
}

impl PageCursor {
    /// # Errors
    /// When `raw` is not a cursor this service handed out.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let bad = || Invalid("not a cursor from a previous page's `next_cursor`".into());
        let (position, after) = match raw.split_once('.') {
            Some((position, hex)) => (position, Some(hex)),
            None => (raw, None),
        };
        let (node, scan) = position.split_once('-').ok_or_else(bad)?;
        let number = |text: &str| {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            text.parse::<u64>().map_err(|_| bad())
        };
        let node = usize::try_from(number(node)?).map_err(|_| bad())?;
        let scan = number(scan)?;
        let after = match after {
            None => None,
            Some(hex) => {
                let bytes = decode_hex(hex).ok_or_else(bad)?;
                let text = String::from_utf8(bytes).map_err(|_| bad())?;
                Some(Name::parse(&text).map_err(|_| bad())?)
            }
        };
        Ok(Self { node, scan, after })
    }

    /// The text form [`Self::parse`] reads back.
    pub fn encode(&self) -> String {
        let position = format!("{}-{}", self.node, self.scan);
        match &self.after {
            None => position,
            Some(name) => {
                let mut out = format!("{position}.");
                for b in name.as_str().bytes() {
                    out.push_str(&format!("{b:02x}"));
                }
                out
            }
        }
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Leases {
    /// One page of those in use (with holders) whose names start with
    /// `prefix` and are `shown` (those the caller may read), sorted by name.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn list(
        &self,
        prefix: &NamePrefix,
        limit: PageLimit,
        cursor: PageCursor,
        shown: Shown<'_>,
    ) -> Result<Page<Status, PageCursor>, Error> {
        page(self, prefix, limit, cursor, shown).await
    }
}

/// Which names a page may show (those its caller may read); the others are
/// skipped as they are found, before any status call, and take no room in
/// the page.
pub type Shown<'a> = &'a (dyn Fn(&Name) -> bool + Sync);

/// One page of the locks or semaphores in use (with holders) whose names
/// start with `prefix` and are `shown`. A page may hold fewer than `limit`
/// entries, none even, and still a cursor, when the names it found were
/// not shown: the work of a page stays bounded however few are.
///
/// # Errors
/// Redis unavailable.
async fn page(
    leases: &Leases,
    prefix: &NamePrefix,
    limit: PageLimit,
    cursor: PageCursor,
    shown: Shown<'_>,
) -> Result<Page<Status, PageCursor>, Error> {
    let (engine, kind) = (leases.engine(), leases.kind());
    // One turn for the whole page: its status calls run together, as one read.
    let _turn = engine.read_turn().await;
    let keys = engine.keys();
    let pattern = keys.scan_pattern(kind, prefix);
    // A name's owners hash outlives its last lease by a minute or two: names
    // found without holders are skipped, and more are looked for, so that
    // the page still fills while more remain.
    let mut entries: Vec<Status> = Vec::new();
    let mut next_cursor = Some(cursor);
    for _ in 0..FILL_ROUNDS {
        let Some(from) = next_cursor.take() else {
            break;
        };
        let want = (limit.get() - entries.len()).max(1);
        let (names, next) = find_names(
            engine,
            &pattern,
            "hash",
            |k| keys.name_of(kind, k),
            shown,
            want,
            from,
        )
        .await?;
        next_cursor = next;
        let statuses: Vec<Status> = stream::iter(names)
            .map(|name| {
                let leases = leases.clone();
                async move { leases.status_now(&name).await }
            })
            .buffered(STATUS_CALLS_IN_FLIGHT)
            .try_collect()
            .await?;
        // Held, or with a line (a queue behind a freeze is shown too).
        entries.extend(
            statuses
                .into_iter()
                .filter(|s| s.holders > 0 || s.waiting > 0),
        );
        if entries.len() >= limit.get() {
            break;
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Page {
        entries,
        next_cursor,
    })
}

/// Up to `limit` names, sorted, from the keys matching `pattern` (of Redis
/// type `kind`) from `cursor` on, those `shown` only, and the cursor after them.
async fn find_names(
    engine: &Engine,
    pattern: &str,
    kind: &str,
    name_of: impl Fn(&str) -> Option<&str>,
    shown: Shown<'_>,
    limit: usize,
    cursor: PageCursor,
) -> Result<(Vec<Name>, Option<PageCursor>), Error> {
    let PageCursor {
        mut node,
        mut scan,
        mut after,
    } = cursor;
    let nodes = engine.store().nodes().await?;
    let mut names = Vec::new();
    for _ in 0..SCANS_PER_PAGE {
        let Some(at) = nodes.get(node) else {
            // A cursor past the last node (the cluster shrank): nothing more.
            names.sort();
            return Ok((names, None));
        };
        let (next, found) = engine
            .store()
            .scan(at, scan, pattern, SCAN_COUNT, kind)
            .await?;
        let mut batch: Vec<Name> = found
            .iter()
            .filter_map(|key| name_of(key))
            .filter_map(|name| Name::parse(name).ok())
            .filter(|name| after.as_ref().is_none_or(|after| name > after))
            .filter(|name| shown(name))
            .collect();
        batch.sort();
        batch.dedup();
        let room = limit - names.len();
        if batch.len() > room {
            // The page ends inside this batch: the next one repeats it from
            // the name after the last one taken.
            batch.truncate(room);
            let last = batch.last().cloned();
            names.extend(batch);
            names.sort();
            return Ok((
                names,
                Some(PageCursor {
                    node,
                    scan,
                    after: last,
                }),
            ));
        }
        names.extend(batch);
        after = None;
        scan = next;
        if next == 0 {
            node += 1;
            if node == nodes.len() {
                names.sort();
                return Ok((names, None));
            }
        }
        if names.len() == limit {
            break;
        }
    }
    names.sort();
    Ok((
        names,
        Some(PageCursor {
            node,
            scan,
            after: None,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_limit_is_1_to_1000() {
        assert_eq!(PageLimit::default().get(), 100);
        assert_eq!(PageLimit::new(1).unwrap().get(), 1);
        assert_eq!(PageLimit::new(1000).unwrap().get(), 1000);
        for bad in [0, 1001, u64::MAX] {
            assert!(PageLimit::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cursors_read_back_what_they_write() {
        for cursor in [
            PageCursor::default(),
            PageCursor {
                node: 2,
                scan: 1234,
                after: None,
            },
            PageCursor {
                node: 0,
                scan: 7,
                after: Some(Name::parse("review/app 1 é🚀.x").unwrap()),
            },
        ] {
            assert_eq!(PageCursor::parse(&cursor.encode()).unwrap(), cursor);
        }
    }

    #[test]
    fn odd_cursors_are_refused() {
        for bad in [
            "",
            "x",
            "1",
            "-1",
            "0--1",
            "0-+1",
            "0-1.",
            "0-1.a",
            "0-1.zz",
            "0-1.0a0",
            ".61",
            "0-1 ",
            "0-99999999999999999999",
            "a-1",
            "0-1.c3", // not UTF-8
            "0-1.07", // a control character: no name
        ] {
            assert!(PageCursor::parse(bad).is_err(), "{bad:?}");
        }
    }
}
