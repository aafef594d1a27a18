//! One rule of a token: a scope on a name or on the names under a prefix,
//! written `write:deploy-a-*`.

use std::fmt;

use super::{Invalid, NamePattern, Scope};

/// A scope on the names a pattern matches: `read:*`, `write:deploy-a-*`,
/// `admin:deploy-prod`. The same rule applies to locks and semaphores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub scope: Scope,
    pub names: NamePattern,
}

impl Grant {
    /// `SCOPE:PATTERN`; the scope ends at the first `:`, so a name may hold
    /// colons (`write:org/repo:prod`).
    ///
    /// # Errors
    /// Without a `:`, with a scope that is not `read`, `write` or `admin`,
    /// or with a pattern no name could match.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let Some((scope, names)) = raw.split_once(':') else {
            return Err(Invalid(
                "must be SCOPE:NAME or SCOPE:PREFIX*, e.g. write:deploy-a-* or read:*".into(),
            ));
        };
        let scope = Scope::parse(scope)?;
        let names = NamePattern::parse(names)
            .map_err(|err| Invalid(format!("the names after {scope}: {err}")))?;
        Ok(Self { scope, names })
    }

    /// `scope` on every name: what `BATON_API_TOKENS` (`write`) and
    /// `BATON_ADMIN_TOKENS` (`admin`) give.
    pub fn everything(scope: Scope) -> Self {
        Self {
            scope,
            names: NamePattern::everything(),
        }
    }

    /// Whether it allows `needed` on `name`.
    pub fn allows(&self, needed: Scope, name: &str) -> bool {
        self.scope.implies(needed) && self.names.matches(name)
    }

    /// Whether it allows `needed` on every name `pattern` matches.
    pub fn covers(&self, needed: Scope, pattern: &NamePattern) -> bool {
        self.scope.implies(needed) && self.names.covers(pattern)
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scope, self.names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_read_back_what_they_write() {
        for raw in [
            "read:*",
            "write:deploy-a-*",
            "admin:deploy-prod",
            "write:org/repo:prod",
            "read:a b*",
        ] {
            assert_eq!(Grant::parse(raw).unwrap().to_string(), raw);
        }
        let colon = Grant::parse("write:org/repo:prod").unwrap();
        assert_eq!(colon.scope, Scope::Write);
        assert!(colon.names.matches("org/repo:prod"));
    }

    #[test]
    fn bad_grants_say_what_is_wrong() {
        for (raw, says) in [
            ("deploy-*", "SCOPE:NAME"),
            ("", "SCOPE:NAME"),
            ("wirte:deploy-*", "read, write or admin"),
            (":deploy", "read, write or admin"),
            ("write:", "the names after write"),
            ("read:bad\u{1b}*", "the names after read"),
        ] {
            let err = Grant::parse(raw).unwrap_err();
            assert!(err.0.contains(says), "{raw:?}: {err}");
        }
    }

    #[test]
    fn a_grant_allows_its_scope_and_those_below_on_its_names() {
        let write = Grant::parse("write:team-a-*").unwrap();
        assert!(write.allows(Scope::Write, "team-a-x"));
        assert!(write.allows(Scope::Read, "team-a-x"));
        assert!(!write.allows(Scope::Admin, "team-a-x"));
        assert!(!write.allows(Scope::Read, "team-b-x"));
        let admin = Grant::everything(Scope::Admin);
        assert!(admin.allows(Scope::Admin, "anything"));
        let prefix = NamePattern::parse("team-a-deploy-*").unwrap();
        assert!(write.covers(Scope::Write, &prefix));
        assert!(!write.covers(Scope::Admin, &prefix));
    }
}
