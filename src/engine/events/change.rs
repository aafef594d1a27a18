//! A change event as a function publishes it, and what a watcher receives:
//! the change, parsed into a type with no field for a lease id (so none can
//! reach a watcher even if a function sent one), or word that changes may
//! have been missed.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::domain::Kind;

/// What happened to a lock or semaphore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Acquired,
    Released,
    Refreshed,
    Expired,
    ForceReleased,
    Queued,
    Left,
    YieldRequested,
}

/// One change, as published by a script (`{"event", "kind", "name", "owner"?,
/// "fencing_token"?, "holders"?, "waiting"}`); any other member, a lease id
/// included, is dropped on parsing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChangeEvent {
    pub event: Change,
    pub kind: Kind,
    pub name: String,
    #[serde(default)]
    pub owner: Option<String>,
    /// Lua's cjson prints large numbers in floating point, so scripts may send
    /// tokens as decimal strings; both forms are read.
    #[serde(default, deserialize_with = "whole_number")]
    pub fencing_token: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub holders: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub waiting: Option<u64>,
    /// `yield-requested`: the asking request's owner.
    #[serde(default)]
    pub by: Option<String>,
    /// `yield-requested`: why it asks.
    #[serde(default)]
    pub reason: Option<String>,
}

impl ChangeEvent {
    /// Parses one published message; `None` for anything that is not a change
    /// event (e.g. another version's payload on the same channel).
    pub fn parse(payload: &[u8]) -> Option<Self> {
        serde_json::from_slice(payload).ok()
    }
}

/// An integer sent as a JSON integer or as a decimal string.
fn whole_number<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(de)? {
        None => Ok(None),
        Some(Raw::Int(n)) => Ok(Some(n)),
        Some(Raw::Text(s)) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum WatchNotice {
    /// One change.
    Change(Arc<ChangeEvent>),
    /// Changes may have been missed (the subscription was lost, or the watcher
    /// fell behind): read the current state again.
    Resync,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_agreed_event_and_drops_anything_else() {
        let change = ChangeEvent::parse(
            br#"{"event":"force-released","kind":"lock","name":"deploy","owner":"ci",
                 "fencing_token":"1763780000000001","waiting":2,"id":"secret-lease-id"}"#,
        )
        .expect("a change event");
        assert_eq!(change.event, Change::ForceReleased);
        assert_eq!(change.kind, Kind::Lock);
        assert_eq!(change.fencing_token, Some(1_763_780_000_000_001));
        assert_eq!(change.waiting, Some(2));
        assert_eq!(change.holders, None);

        let sem = ChangeEvent::parse(
            br#"{"event":"queued","kind":"semaphore","name":"w","holders":3,"waiting":1}"#,
        )
        .expect("a semaphore event");
        assert_eq!(sem.holders, Some(3));

        assert_eq!(ChangeEvent::parse(b"lock:deploy"), None);
        assert_eq!(
            ChangeEvent::parse(br#"{"event":"exploded","kind":"lock","name":"x","waiting":0}"#),
            None
        );
    }
}
