//! Every Redis key and channel name the service uses, built in one place.
//!
//! The keys of one lock or semaphore share a hash tag (`{lock:NAME}`,
//! `{sem:NAME}`), so a script touching several of them stays in one cluster
//! slot, and so does the name's channel (for sharded pub/sub on a cluster).

use crate::domain::{Kind, Name, NamePrefix};

/// A kind's part of the hash tag: `{lock:NAME}`, `{sem:NAME}`.
fn tag(kind: Kind) -> &'static str {
    match kind {
        Kind::Lock => "lock",
        Kind::Semaphore => "sem",
    }
}

/// The key layout under one configurable prefix (`BATON_KEY_PREFIX`).
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
    events: String,
}

impl Keys {
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        let events = format!("{prefix}events");
        Self { prefix, events }
    }

    /// `prefix{lock:NAME}:suffix`: a key of one name, under its hash tag,
    /// built in one allocation (every call builds two of them).
    fn of_name(&self, kind: Kind, name: &Name, suffix: &str) -> String {
        let (tag, name) = (tag(kind), name.as_str());
        let mut key =
            String::with_capacity(self.prefix.len() + tag.len() + name.len() + suffix.len() + 4);
        for part in [self.prefix.as_str(), "{", tag, ":", name, "}:", suffix] {
            key.push_str(part);
        }
        key
    }

    /// The owners hash of `name`: the one key every call declares
    /// (`functions/core/state.lua` names the others from it).
    pub fn owners(&self, kind: Kind, name: &Name) -> String {
        self.of_name(kind, name, "owners")
    }

    /// A short-lived string written before `WAIT` (BATON_REDIS_WAIT_REPLICAS),
    /// in the name's slot: `WAIT` counts the writes of its own connection.
    pub fn replication_mark(&self, kind: Kind, name: &Name) -> String {
        self.of_name(kind, name, "mark")
    }

    /// The channel on which scripts tell instances about `name`'s line
    /// (grants, supersessions, earlier expiries).
    pub fn name_channel(&self, kind: Kind, name: &Name) -> String {
        self.of_name(kind, name, "events")
    }

    /// The record of the claim `id` (which leases it holds): one key with the
    /// claim's own hash tag, so it lives on whichever node holds that slot,
    /// apart from every name's keys. It holds a capability: never log it.
    pub fn claim(&self, id: &crate::domain::ClaimId) -> String {
        format!("{}{{claim:{}}}", self.prefix, id.expose())
    }

    /// The instance-wide channel of JSON change events (for the dashboard).
    pub fn events_channel(&self) -> &str {
        &self.events
    }

    /// The index of the freezes (`prefix{freezes}:index`): outside every
    /// name's slot, beside the freezes' own keys.
    pub fn freeze_index(&self) -> String {
        format!("{}{{freezes}}:index", self.prefix)
    }

    /// The zset of the freezes the token named `by` made
    /// (`prefix{freezes}:by:NAME`, `freezes.lua` builds it too), in the
    /// index's slot.
    pub fn freezes_by(&self, by: &crate::domain::TokenName) -> String {
        format!("{}{{freezes}}:by:{}", self.prefix, by.as_str())
    }

    /// The key of the freeze `id`, in the index's slot.
    pub fn freeze(&self, id: &crate::domain::FreezeId) -> String {
        format!("{}{{freezes}}:{id}", self.prefix)
    }

    /// The index of the names with tickets that asked a turn notice
    /// (`prefix{notices}:index`, engine/notices): outside every name's slot.
    pub fn notice_index(&self) -> String {
        format!("{}{{notices}}:index", self.prefix)
    }

    /// The channel on which every instance hears that the freezes changed
    /// (classic pub/sub: on a cluster, heard on every node).
    pub fn freezes_channel(&self) -> String {
        format!("{}freezes", self.prefix)
    }

    /// A SCAN pattern matching the owners hashes of the names of `kind` that
    /// start with `prefix` (glob characters in either match only themselves).
    pub fn scan_pattern(&self, kind: Kind, prefix: &NamePrefix) -> String {
        // Names may hold glob characters too: both parts match only themselves.
        let head = format!("{}{{{}:{}", self.prefix, tag(kind), prefix.as_str());
        let mut pattern = String::with_capacity(head.len() + 16);
        for c in head.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str("*}:owners");
        pattern
    }

    /// The name inside a key found by [`Self::scan_pattern`].
    pub fn name_of<'a>(&self, kind: Kind, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix('{')?
            .strip_prefix(tag(kind))?
            .strip_prefix(':')?
            .strip_suffix("}:owners")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_resource_share_a_hash_tag() {
        let keys = Keys::new("baton:");
        let name = Name::parse("deploy").unwrap();
        let owned = [
            keys.owners(Kind::Lock, &name),
            keys.replication_mark(Kind::Lock, &name),
            keys.name_channel(Kind::Lock, &name),
        ];
        assert_eq!(owned[0], "baton:{lock:deploy}:owners");
        assert!(owned.iter().all(|k| k.starts_with("baton:{lock:deploy}:")));
        assert_eq!(
            keys.name_channel(Kind::Semaphore, &name),
            "baton:{sem:deploy}:events"
        );
        assert_eq!(keys.events_channel(), "baton:events");
    }

    #[test]
    fn scan_pattern_escapes_the_key_prefix_and_finds_names_back() {
        let keys = Keys::new("t[1]*:");
        let prefix = NamePrefix::parse("ci.").unwrap();
        assert_eq!(
            keys.scan_pattern(Kind::Lock, &prefix),
            r"t\[1\]\*:{lock:ci.*}:owners"
        );
        assert_eq!(
            keys.name_of(Kind::Lock, "t[1]*:{lock:ci.deploy}:owners"),
            Some("ci.deploy")
        );
        assert_eq!(
            keys.name_of(Kind::Lock, "t[1]*:{lock:ci.deploy}:fence"),
            None
        );
        assert_eq!(
            keys.name_of(Kind::Semaphore, "t[1]*:{lock:ci.deploy}:owners"),
            None
        );

        let keys = Keys::new("baton:");
        let prefix = NamePrefix::parse(r"a*b?[c]\/").unwrap();
        assert_eq!(
            keys.scan_pattern(Kind::Semaphore, &prefix),
            r"baton:{sem:a\*b\?\[c\]\\/*}:owners"
        );
        let name = Name::parse("review/a}:owners").unwrap();
        let key = &keys.owners(Kind::Semaphore, &name);
        assert_eq!(keys.name_of(Kind::Semaphore, key), Some(name.as_str()));
    }
}
