//! Who a request is, as far as baton cares: the token's name and what it
//! may do ([`Principal`]); and the refusal when it may not ([`Denied`]).
//!
//! Every route that takes a name asks the principal before any Redis call:
//! `principal.require(Scope::Write, &name)?`. Listings and streams filter
//! with [`Principal::may_read`] and look only where it may read
//! ([`Principal::readable_within`]).

use std::fmt;
use std::time::SystemTime;

use crate::domain::{Grant, Name, NamePattern, NamePrefix, Priority, Scope, TokenName};

/// The caller of a request: the name of its token (`None` on a service
/// without tokens, which lets anyone do anything), its grants, and the
/// limits its entry in the token file sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    name: Option<TokenName>,
    grants: Vec<Grant>,
    /// After it, the token is refused like a removed one (`expires`).
    expires: Option<SystemTime>,
    /// The highest `priority` it may ask for (`max_priority`, default 9).
    max_priority: Option<Priority>,
}

/// A `priority` above the token's `max_priority`: 403 `forbidden` naming
/// `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "priority: this token may ask for a priority of at most {max} (its max_priority), not {asked}"
)]
pub struct PriorityDenied {
    pub max: Priority,
    pub asked: Priority,
}

impl Principal {
    /// A token named `name` with `grants`.
    pub fn new(name: TokenName, grants: Vec<Grant>) -> Self {
        Self {
            name: Some(name),
            grants,
            expires: None,
            max_priority: None,
        }
    }

    /// The same, refused after `expires` and asking at most `max_priority`.
    #[must_use]
    pub fn with_limits(self, expires: Option<SystemTime>, max_priority: Option<Priority>) -> Self {
        Self {
            expires,
            max_priority,
            ..self
        }
    }

    /// Anyone, on a service without tokens: `admin:*`, and no name.
    pub fn anyone() -> Self {
        Self {
            name: None,
            grants: vec![Grant::everything(Scope::Admin)],
            expires: None,
            max_priority: None,
        }
    }

    /// When it stops being accepted, if ever.
    pub fn expires(&self) -> Option<SystemTime> {
        self.expires
    }

    /// Whether it is past its `expires` at `now`.
    pub fn expired_at(&self, now: SystemTime) -> bool {
        self.expires.is_some_and(|at| now >= at)
    }

    /// # Errors
    /// [`PriorityDenied`] when `asked` is above its `max_priority`.
    pub fn require_priority(&self, asked: Priority) -> Result<(), PriorityDenied> {
        match self.max_priority {
            Some(max) if asked > max => Err(PriorityDenied { max, asked }),
            _ => Ok(()),
        }
    }

    /// The token's name, for audit lines and history (`by`); `None` on a
    /// service without tokens.
    pub fn name(&self) -> Option<&TokenName> {
        self.name.as_ref()
    }

    /// Its grants, as configured.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// Adds `grants` (the same token listed twice), and takes `name` when
    /// given (a file's name wins over a variable's).
    pub(super) fn merge(&mut self, name: Option<TokenName>, grants: Vec<Grant>) {
        if name.is_some() {
            self.name = name;
        }
        for grant in grants {
            if !self.grants.contains(&grant) {
                self.grants.push(grant);
            }
        }
    }

    /// Whether it may read at least one name under `prefix` (a stream on
    /// `prefix` it may read nothing of ends).
    pub fn may_read_within(&self, prefix: &NamePrefix) -> bool {
        self.readable_within(prefix).is_some()
    }

    /// Whether it may do what `scope` allows on `name`.
    pub fn allows(&self, scope: Scope, name: &Name) -> bool {
        self.allows_text(scope, name.as_str())
    }

    fn allows_text(&self, scope: Scope, name: &str) -> bool {
        self.grants.iter().any(|grant| grant.allows(scope, name))
    }

    /// Whether it may see `name`: in status, listings and streams.
    pub fn may_read(&self, name: &Name) -> bool {
        self.allows(Scope::Read, name)
    }

    /// Whether it may read some name `pattern` matches: what a freeze of
    /// `pattern` takes to be shown to it (`read:team-a-*` sees a freeze of
    /// `team-*`, which holds its names too, and one of `team-a-deploy`).
    pub fn may_read_some(&self, pattern: &NamePattern) -> bool {
        self.grants
            .iter()
            .any(|grant| grant.scope.implies(Scope::Read) && grant.names.overlaps(pattern))
    }

    /// [`Self::may_read`] of a name as a stream of changes carries it (text
    /// from Redis, not parsed again).
    pub fn may_read_text(&self, name: &str) -> bool {
        self.allows_text(Scope::Read, name)
    }

    /// # Errors
    /// [`Denied`] naming `scope` and `name` unless it [`allows`](Self::allows) it.
    pub fn require(&self, scope: Scope, name: &Name) -> Result<(), Denied> {
        if self.allows(scope, name) {
            Ok(())
        } else {
            Err(Denied {
                needed: scope,
                names: NamePattern::Name(name.clone()),
            })
        }
    }

    /// `scope` on every one of `names` (a claim needs `write` on each).
    ///
    /// # Errors
    /// [`Denied`] naming the first name it may not touch.
    pub fn require_all<'a>(
        &self,
        scope: Scope,
        names: impl IntoIterator<Item = &'a Name>,
    ) -> Result<(), Denied> {
        names
            .into_iter()
            .try_for_each(|name| self.require(scope, name))
    }

    /// Whether one of its grants gives `scope` on every name `pattern`
    /// matches: a freeze of `deploy-*` needs `admin` on `deploy-*` or on a
    /// shorter prefix (`admin:deploy-prod` alone does not cover it).
    pub fn covers(&self, scope: Scope, pattern: &NamePattern) -> bool {
        self.grants.iter().any(|grant| grant.covers(scope, pattern))
    }

    /// [`Self::covers`] or the refusal.
    ///
    /// # Errors
    /// [`Denied`] naming `scope` and `pattern`.
    pub fn require_covering(&self, scope: Scope, pattern: &NamePattern) -> Result<(), Denied> {
        if self.covers(scope, pattern) {
            Ok(())
        } else {
            Err(Denied {
                needed: scope,
                names: pattern.clone(),
            })
        }
    }

    /// Where, under `prefix`, a listing or a stream for this caller must
    /// look: the longest prefix shared by every name under `prefix` it may
    /// read, or `None` when it may read none of them (then nothing need be
    /// asked of Redis). Entries are still filtered with
    /// [`Self::may_read`]: this only narrows the search.
    pub fn readable_within(&self, prefix: &NamePrefix) -> Option<NamePrefix> {
        self.grants
            .iter()
            .filter(|grant| grant.scope.implies(Scope::Read))
            .filter_map(|grant| grant.names.within(prefix))
            .reduce(|a, b| common_prefix(&a, &b))
    }
}

/// The longest prefix of both, cut at a character boundary.
fn common_prefix(a: &NamePrefix, b: &NamePrefix) -> NamePrefix {
    let end = a
        .as_str()
        .char_indices()
        .zip(b.as_str().chars())
        .find(|((_, x), y)| x != y)
        .map_or_else(|| a.as_str().len().min(b.as_str().len()), |((at, _), _)| at);
    NamePrefix::parse(&a.as_str()[..end]).unwrap_or_default()
}

/// A request outside its token's scopes: 403 `forbidden`, naming the scope
/// it needed and the name (or the names) it was for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Denied {
    /// The scope the request needed.
    pub needed: Scope,
    /// The name, or the names, it needed it on.
    pub names: NamePattern,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (verb, scope) = (self.needed.verb(), self.needed);
        match &self.names {
            NamePattern::Name(name) => write!(
                f,
                "this token may not {verb} {:?}: it needs {scope} on that name",
                name.as_str()
            ),
            NamePattern::Prefix(_) => write!(
                f,
                "this token may not {verb} every name matching {:?}: it needs {scope} \
                 on that prefix or a shorter one",
                self.names.to_string()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(grants: &[&str]) -> Principal {
        Principal::new(
            TokenName::parse("team-a-ci").unwrap(),
            grants.iter().map(|g| Grant::parse(g).unwrap()).collect(),
        )
    }

    fn name(raw: &str) -> Name {
        Name::parse(raw).unwrap()
    }

    fn pattern(raw: &str) -> NamePattern {
        NamePattern::parse(raw).unwrap()
    }

    #[test]
    fn a_team_token_writes_its_names_and_reads_what_it_is_given() {
        let team = principal(&["write:team-a-*", "read:*"]);
        assert!(team.require(Scope::Write, &name("team-a-x")).is_ok());
        assert!(team.require(Scope::Read, &name("team-b-x")).is_ok());
        let denied = team.require(Scope::Write, &name("team-b-x")).unwrap_err();
        assert_eq!(
            denied.to_string(),
            "this token may not write \"team-b-x\": it needs write on that name"
        );
        let denied = team.require(Scope::Admin, &name("team-a-x")).unwrap_err();
        assert_eq!(
            denied.to_string(),
            "this token may not administer \"team-a-x\": it needs admin on that name"
        );
        assert_eq!(team.name().unwrap().as_str(), "team-a-ci");
    }

    #[test]
    fn a_token_sees_the_patterns_that_can_match_a_name_it_reads() {
        let team = principal(&["read:team-a-*", "write:ops-1"]);
        assert!(team.may_read_some(&pattern("team-*")));
        assert!(team.may_read_some(&pattern("*")));
        assert!(team.may_read_some(&pattern("team-a-deploy")));
        assert!(team.may_read_some(&pattern("team-a-eu-*")));
        assert!(team.may_read_some(&pattern("ops-*")));
        assert!(!team.may_read_some(&pattern("team-b-*")));
        assert!(!team.may_read_some(&pattern("ops-2")));
        assert!(Principal::anyone().may_read_some(&pattern("x")));
    }

    #[test]
    fn a_read_token_reads_but_cannot_write() {
        let reader = principal(&["read:*"]);
        assert!(reader.may_read(&name("anything")));
        assert!(reader.may_read_text("anything"));
        assert!(!reader.allows(Scope::Write, &name("anything")));
    }

    #[test]
    fn anyone_on_an_open_service_may_do_everything_and_has_no_name() {
        let anyone = Principal::anyone();
        assert!(anyone.require(Scope::Admin, &name("x")).is_ok());
        assert!(anyone.covers(Scope::Admin, &pattern("*")));
        assert_eq!(anyone.name(), None);
    }

    #[test]
    fn a_claim_needs_its_scope_on_every_name() {
        let team = principal(&["write:team-a-*"]);
        let (mine, theirs) = (name("team-a-1"), name("team-b-1"));
        assert!(team.require_all(Scope::Write, [&mine, &mine]).is_ok());
        let denied = team
            .require_all(Scope::Write, [&mine, &theirs])
            .unwrap_err();
        assert_eq!(denied.names, NamePattern::Name(theirs));
    }

    #[test]
    fn a_prefix_needs_one_grant_that_covers_it() {
        let admin = principal(&["admin:deploy-*", "admin:ops-prod"]);
        assert!(admin.covers(Scope::Admin, &pattern("deploy-*")));
        assert!(admin.covers(Scope::Admin, &pattern("deploy-eu-*")));
        assert!(admin.covers(Scope::Admin, &pattern("ops-prod")));
        assert!(!admin.covers(Scope::Admin, &pattern("ops-*")));
        assert!(!admin.covers(Scope::Admin, &pattern("*")));
        let denied = admin
            .require_covering(Scope::Admin, &pattern("ops-*"))
            .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "this token may not administer every name matching \"ops-*\": it needs admin \
             on that prefix or a shorter one"
        );
        let writer = principal(&["write:deploy-*"]);
        assert!(!writer.covers(Scope::Admin, &pattern("deploy-*")));
    }

    #[test]
    fn a_listing_looks_only_where_the_token_may_read() {
        let within = |grants: &[&str], prefix: &str| {
            principal(grants)
                .readable_within(&NamePrefix::parse(prefix).unwrap())
                .map(|p| p.as_str().to_owned())
        };
        assert_eq!(within(&["write:team-a-*"], "").as_deref(), Some("team-a-"));
        assert_eq!(within(&["write:team-a-*"], "team-b"), None);
        assert_eq!(
            within(&["read:team-a-*", "read:team-b-*"], "").as_deref(),
            Some("team-")
        );
        assert_eq!(within(&["read:*", "write:x-*"], "q").as_deref(), Some("q"));
        assert_eq!(within(&["read:é1", "read:é2"], "").as_deref(), Some("é"));
        assert_eq!(within(&["read:éa", "read:èb"], "").as_deref(), Some(""));
        // `admin` and `write` read too.
        assert_eq!(within(&["admin:ops"], "").as_deref(), Some("ops"));
    }

    #[test]
    fn the_same_token_twice_has_both_grants() {
        let mut token = principal(&["write:team-a-*"]);
        token.merge(None, vec![Grant::parse("read:*").unwrap()]);
        token.merge(None, vec![Grant::parse("read:*").unwrap()]);
        assert_eq!(token.grants().len(), 2);
        assert_eq!(token.name().unwrap().as_str(), "team-a-ci");
    }
}
