//! Every Redis key and channel name the service uses, built in one place.
//!
//! The keys of one lock or semaphore share a hash tag (`{lock:NAME}`,
//! `{sem:NAME}`), so a script touching several of them stays in one cluster slot.

use crate::domain::{Name, NamePrefix};

/// The key layout under one configurable prefix (`BATON_KEY_PREFIX`).
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
    channel: String,
}

impl Keys {
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        let channel = format!("{prefix}events");
        Self { prefix, channel }
    }

    /// The lock's lease hash: holder id, token, ttl, owner; expires with the lease.
    pub fn lock(&self, name: &Name) -> String {
        format!("{}{{lock:{name}}}", self.prefix)
    }

    /// The lock's fencing counter; never expires.
    pub fn lock_fence(&self, name: &Name) -> String {
        format!("{}{{lock:{name}}}:fence", self.prefix)
    }

    pub fn sem_leases(&self, name: &Name) -> String {
        format!("{}{{sem:{name}}}:leases", self.prefix)
    }

    pub fn sem_owners(&self, name: &Name) -> String {
        format!("{}{{sem:{name}}}:owners", self.prefix)
    }

    pub fn sem_queue(&self, name: &Name) -> String {
        format!("{}{{sem:{name}}}:queue", self.prefix)
    }

    pub fn sem_deadlines(&self, name: &Name) -> String {
        format!("{}{{sem:{name}}}:deadlines", self.prefix)
    }

    pub fn sem_fence(&self, name: &Name) -> String {
        format!("{}{{sem:{name}}}:fence", self.prefix)
    }

    /// The pub/sub channel on which releases are announced to every instance.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// A SCAN pattern matching the lease hashes of the locks whose names start
    /// with `prefix` (names have no glob characters; the key prefix may).
    pub fn lock_scan_pattern(&self, prefix: &NamePrefix) -> String {
        let mut pattern = String::with_capacity(self.prefix.len() + prefix.as_str().len() + 9);
        for c in self.prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str("{lock:");
        pattern.push_str(prefix.as_str());
        pattern.push_str("*}");
        pattern
    }

    /// The lock name inside a key found by [`Self::lock_scan_pattern`].
    pub fn lock_name_of<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix("{lock:")?
            .strip_suffix('}')
    }
}

/// The event payload announcing a release of lock `name`, and the waiter
/// registry's key for it.
pub fn lock_event(name: &Name) -> String {
    format!("lock:{name}")
}

/// The same for semaphore `name`.
pub fn sem_event(name: &Name) -> String {
    format!("sem:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_resource_share_a_hash_tag() {
        let keys = Keys::new("baton:");
        let name = Name::parse("deploy").unwrap();
        assert_eq!(keys.lock(&name), "baton:{lock:deploy}");
        assert_eq!(keys.lock_fence(&name), "baton:{lock:deploy}:fence");
        assert_eq!(keys.sem_leases(&name), "baton:{sem:deploy}:leases");
        assert_eq!(keys.sem_fence(&name), "baton:{sem:deploy}:fence");
        assert_eq!(keys.channel(), "baton:events");
    }

    #[test]
    fn scan_pattern_escapes_the_key_prefix_and_finds_names_back() {
        let keys = Keys::new("t[1]*:");
        let prefix = NamePrefix::parse("ci.").unwrap();
        assert_eq!(keys.lock_scan_pattern(&prefix), r"t\[1\]\*:{lock:ci.*}");
        assert_eq!(
            keys.lock_name_of("t[1]*:{lock:ci.deploy}"),
            Some("ci.deploy")
        );
        assert_eq!(keys.lock_name_of("t[1]*:{lock:ci.deploy}:fence"), None);
    }
}
