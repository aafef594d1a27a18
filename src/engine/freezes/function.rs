//! `freezes.lua`: the list of freezes in Redis (list, put, delete), and the
//! one format a freeze is kept in there (JSON, read back into a
//! [`Freeze`] once, when an instance first loads it: [`read_stored`]).

use redis::Cmd;
use serde::{Deserialize, Serialize};

use crate::domain::{
    Freeze, FreezeId, Kind, NamePattern, Reason, Recurring, Schedule, TokenName, Window,
};
use crate::engine::error::Error;
use crate::engine::functions::cursor::Cursor;
use crate::engine::functions::library::{Function, Op};

/// The list call: every freeze in Redis, and the list's version.
pub(in crate::engine) struct ListFreezes;

/// The list as one call read it: its version, when Redis read it (ms,
/// Redis's clock) and its freezes as Redis keeps them (read with
/// [`read_stored`], once per freeze: an instance keeps what it read).
pub(in crate::engine) struct Listed {
    pub version: String,
    pub read_ms: i64,
    pub stored: Vec<String>,
}

/// The version call: the list's version in Redis, whose change says the
/// list must be read again.
pub(in crate::engine) struct FreezesVersion;

/// A change to the list, told to every instance on `channel`.
pub(in crate::engine) enum ChangeFreezes<'a> {
    /// Writes `freeze` under `key`, counted in its maker's zset `by` (none
    /// without a token), which may hold `per_name` freezes in force; past
    /// the list's maximum only when `beyond_max`.
    Put {
        key: String,
        freeze: &'a Freeze,
        channel: String,
        by: Option<String>,
        per_name: usize,
        beyond_max: bool,
    },
    /// Deletes the freeze under `key`.
    Delete { key: String, channel: String },
}

/// What a change came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Changed {
    Done,
    /// Put: its window is over already; delete: no such freeze.
    Nothing,
    /// Put: the list holds its maximum of freezes.
    Full,
    /// Put: its maker keeps as many freezes in force as one name may.
    FullForName,
}

impl Function for ListFreezes {
    const OP: Op = Op::Freezes;
    type Reply = Listed;

    fn args(&self, call: &mut Cmd) {
        call.arg("list");
    }

    /// `n, version, now_ms, (key, json) x n`.
    fn decode(reply: &mut Cursor) -> Result<Listed, Error> {
        let n = reply.count()?;
        let version = reply.text()?;
        let read_ms = reply.int()?;
        let mut stored = Vec::with_capacity(n);
        for _ in 0..n {
            let _key = reply.text()?;
            stored.push(reply.text()?);
        }
        Ok(Listed {
            version,
            read_ms,
            stored,
        })
    }
}

/// A freeze as Redis keeps it (JSON), read back; `None` for one that no
/// longer reads as a freeze, left out and logged.
pub(in crate::engine) fn read_stored(json: &str) -> Option<Freeze> {
    match Stored::from_json(json).and_then(Stored::into_freeze) {
        Ok(freeze) => Some(freeze),
        Err(why) => {
            tracing::warn!(why, "a freeze in Redis does not read as one; ignored");
            None
        }
    }
}

impl Function for FreezesVersion {
    const OP: Op = Op::Freezes;
    /// The version, and when Redis read it (ms, Redis's clock).
    type Reply = (String, i64);

    fn args(&self, call: &mut Cmd) {
        call.arg("version");
    }

    fn decode(reply: &mut Cursor) -> Result<(String, i64), Error> {
        Ok((reply.text()?, reply.int()?))
    }
}

impl Function for ChangeFreezes<'_> {
    const OP: Op = Op::Freezes;
    type Reply = Changed;

    fn args(&self, call: &mut Cmd) {
        match self {
            Self::Put {
                key,
                freeze,
                channel,
                by,
                per_name,
                beyond_max,
            } => {
                call.arg("put")
                    .arg(key)
                    .arg(Stored::of(freeze).to_json())
                    .arg(freeze.schedule.expires_at_ms().unwrap_or(0).max(0))
                    .arg(channel)
                    .arg(by.as_deref().unwrap_or(""))
                    .arg(*per_name)
                    .arg(if *beyond_max { "1" } else { "0" });
            }
            Self::Delete { key, channel } => {
                call.arg("delete").arg(key).arg("").arg(0).arg(channel);
            }
        }
    }

    fn decode(reply: &mut Cursor) -> Result<Changed, Error> {
        match reply.int()? {
            1 => Ok(Changed::Done),
            0 => Ok(Changed::Nothing),
            -1 => Ok(Changed::Full),
            -2 => Ok(Changed::FullForName),
            code => Err(Error::Protocol(format!("freezes replied {code}"))),
        }
    }
}

/// A freeze as Redis keeps it: its fields as the API names them, times in
/// milliseconds.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    id: String,
    #[serde(rename = "match")]
    pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze_end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron_timezone: Option<String>,
    created_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
}

impl Stored {
    fn of(freeze: &Freeze) -> Self {
        let mut stored = Self {
            id: freeze.id.to_string(),
            pattern: freeze.pattern.to_string(),
            kind: freeze.kind,
            reason: freeze.reason.as_ref().map(|r| r.as_str().to_owned()),
            from_ms: None,
            until_ms: None,
            freeze_start: None,
            freeze_end: None,
            cron_timezone: None,
            created_ms: freeze.created_ms,
            by: freeze.by.as_ref().map(|b| b.as_str().to_owned()),
        };
        match &freeze.schedule {
            Schedule::OneOff(window) => {
                stored.from_ms = Some(window.start_ms);
                stored.until_ms = Some(window.end_ms);
            }
            Schedule::Recurring(recurring) => {
                stored.freeze_start = Some(recurring.start().to_owned());
                stored.freeze_end = Some(recurring.end().to_owned());
                stored.cron_timezone = Some(recurring.zone().to_owned());
            }
        }
        stored
    }

    fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn from_json(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    fn into_freeze(self) -> Result<Freeze, String> {
        let schedule = match (
            self.from_ms,
            self.until_ms,
            &self.freeze_start,
            &self.freeze_end,
        ) {
            (Some(start_ms), Some(end_ms), None, None) => {
                Schedule::OneOff(Window { start_ms, end_ms })
            }
            (None, None, Some(start), Some(end)) => Schedule::Recurring(Box::new(
                Recurring::parse(start, end, self.cron_timezone.as_deref())
                    .map_err(|(field, why)| format!("{field}: {why}"))?,
            )),
            _ => return Err("neither a one-off nor a recurring window".into()),
        };
        Ok(Freeze {
            id: FreezeId::parse(&self.id).map_err(|e| e.0)?,
            pattern: NamePattern::parse(&self.pattern).map_err(|e| e.0)?,
            kind: self.kind,
            reason: Reason::parse(self.reason).map_err(|e| e.0)?,
            schedule,
            created_ms: self.created_ms,
            by: self
                .by
                .as_deref()
                .map(TokenName::parse)
                .transpose()
                .map_err(|e| e.0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freeze_reads_back_as_it_was_kept() {
        let freeze = Freeze {
            id: FreezeId::new(),
            pattern: NamePattern::parse("deploy-*").unwrap(),
            kind: Some(Kind::Lock),
            reason: Reason::parse(Some("weekend".into())).unwrap(),
            schedule: Schedule::Recurring(Box::new(
                Recurring::parse("0 23 * * 5", "0 7 * * 1", Some("Europe/Berlin")).unwrap(),
            )),
            created_ms: 42,
            by: Some(TokenName::parse("ops").unwrap()),
        };
        let json = Stored::of(&freeze).to_json();
        let back = Stored::from_json(&json)
            .and_then(Stored::into_freeze)
            .unwrap();
        assert_eq!(back.id, freeze.id);
        assert_eq!(back.pattern, freeze.pattern);
        assert_eq!(back.kind, freeze.kind);
        assert_eq!(back.reason, freeze.reason);
        assert_eq!(Stored::of(&back).to_json(), json);
    }
}
