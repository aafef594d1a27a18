//! A name, or every name under a prefix (`deploy-*`): what a token's scope
//! applies to, and what a freeze matches.

use std::fmt;

use super::{Invalid, Name, NamePrefix};

/// One name, or every name that starts with a prefix. Written as the name,
/// or as the prefix followed by `*`: a trailing `*` always means "any
/// rest", so `*` alone is every name; a `*` anywhere else is itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamePattern {
    /// Exactly this name.
    Name(Name),
    /// Every name that starts with this (every name when it is empty).
    Prefix(NamePrefix),
}

impl NamePattern {
    /// `deploy-prod` (one name) or `deploy-*` (a prefix).
    ///
    /// # Errors
    /// When what is left is not a name (or a prefix) that could exist.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw.strip_suffix('*') {
            Some(prefix) => NamePrefix::parse(prefix).map(Self::Prefix),
            None => Name::parse(raw).map(Self::Name),
        }
    }

    /// Every name: `*`.
    pub fn everything() -> Self {
        Self::Prefix(NamePrefix::default())
    }

    /// Whether `name` is one this pattern matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::Name(own) => own.as_str() == name,
            Self::Prefix(prefix) => name.starts_with(prefix.as_str()),
        }
    }

    /// Whether every name `other` matches is one this pattern matches
    /// (`deploy-*` covers `deploy-a-*` and `deploy-prod`; a name covers only
    /// itself).
    pub fn covers(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Name(own), Self::Name(name)) => own == name,
            (Self::Name(_), Self::Prefix(_)) => false,
            (Self::Prefix(prefix), Self::Name(name)) => name.as_str().starts_with(prefix.as_str()),
            (Self::Prefix(prefix), Self::Prefix(other)) => {
                other.as_str().starts_with(prefix.as_str())
            }
        }
    }

    /// Whether some name is matched by both this pattern and `other`: two
    /// prefixes overlap when one starts with the other (`team-*` and
    /// `team-a-*` both match `team-a-x`), a name and a prefix when the name
    /// starts with it.
    pub fn overlaps(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Name(own), Self::Name(name)) => own == name,
            (Self::Name(name), Self::Prefix(prefix)) | (Self::Prefix(prefix), Self::Name(name)) => {
                name.as_str().starts_with(prefix.as_str())
            }
            (Self::Prefix(own), Self::Prefix(other)) => {
                own.as_str().starts_with(other.as_str()) || other.as_str().starts_with(own.as_str())
            }
        }
    }

    /// Whether every name under `prefix` is one this pattern matches.
    pub fn covers_prefix(&self, prefix: &NamePrefix) -> bool {
        self.covers(&Self::Prefix(prefix.clone()))
    }

    /// The longest prefix shared by every name that both this pattern and
    /// `prefix` match: `None` when no name is matched by both. A listing
    /// under `prefix` by someone who may see only this pattern's names
    /// needs to look no wider than that.
    pub fn within(&self, prefix: &NamePrefix) -> Option<NamePrefix> {
        let (wanted, own) = (prefix.as_str(), self.text_prefix());
        if own.starts_with(wanted) {
            Some(NamePrefix::parse(own).unwrap_or_default())
        } else if matches!(self, Self::Prefix(_)) && wanted.starts_with(own) {
            Some(prefix.clone())
        } else {
            None
        }
    }

    /// What every matched name starts with: the name itself, or the prefix.
    fn text_prefix(&self) -> &str {
        match self {
            Self::Name(name) => name.as_str(),
            Self::Prefix(prefix) => prefix.as_str(),
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name.as_str()),
            Self::Prefix(prefix) => write!(f, "{}*", prefix.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(raw: &str) -> NamePattern {
        NamePattern::parse(raw).unwrap()
    }

    fn prefix(raw: &str) -> NamePrefix {
        NamePrefix::parse(raw).unwrap()
    }

    #[test]
    fn a_trailing_star_makes_a_prefix() {
        assert_eq!(pattern("deploy-*"), NamePattern::Prefix(prefix("deploy-")));
        assert_eq!(pattern("*"), NamePattern::everything());
        assert_eq!(
            pattern("deploy"),
            NamePattern::Name(Name::parse("deploy").unwrap())
        );
        // Only a trailing star is special.
        assert_eq!(
            pattern("a*b"),
            NamePattern::Name(Name::parse("a*b").unwrap())
        );
        for raw in ["deploy-*", "*", "review/app 1", "a*b", "org/repo:prod*"] {
            assert_eq!(pattern(raw).to_string(), raw);
        }
    }

    #[test]
    fn what_no_name_could_be_is_refused() {
        assert!(NamePattern::parse("").is_err());
        assert!(NamePattern::parse("bad\u{7}*").is_err());
        assert!(NamePattern::parse(&"x".repeat(201)).is_err());
    }

    #[test]
    fn a_pattern_matches_its_name_or_the_names_under_its_prefix() {
        let team = pattern("team-a-*");
        assert!(team.matches("team-a-x") && team.matches("team-a-"));
        assert!(!team.matches("team-b-x") && !team.matches("team-a"));
        let one = pattern("team-a-x");
        assert!(one.matches("team-a-x") && !one.matches("team-a-xy"));
        assert!(pattern("*").matches("anything at all"));
    }

    #[test]
    fn a_prefix_covers_what_lies_under_it_and_a_name_only_itself() {
        assert!(pattern("deploy-*").covers(&pattern("deploy-a-*")));
        assert!(pattern("deploy-*").covers(&pattern("deploy-*")));
        assert!(pattern("deploy-*").covers(&pattern("deploy-prod")));
        assert!(pattern("*").covers(&pattern("deploy-*")));
        assert!(!pattern("deploy-a-*").covers(&pattern("deploy-*")));
        assert!(!pattern("deploy-a-*").covers(&pattern("deploy-b")));
        assert!(pattern("deploy").covers(&pattern("deploy")));
        assert!(!pattern("deploy").covers(&pattern("deploy*")));
        assert!(!pattern("deploy").covers(&pattern("deploy-2")));
        assert!(pattern("deploy-*").covers_prefix(&prefix("deploy-eu-")));
        assert!(!pattern("deploy-eu-*").covers_prefix(&prefix("deploy-")));
    }

    #[test]
    fn two_patterns_overlap_when_some_name_matches_both() {
        let overlap = |a: &str, b: &str| {
            let (a, b) = (pattern(a), pattern(b));
            assert_eq!(a.overlaps(&b), b.overlaps(&a), "symmetric");
            a.overlaps(&b)
        };
        assert!(overlap("team-*", "team-a-*"));
        assert!(overlap("team-a-*", "team-a-*"));
        assert!(overlap("*", "anything"));
        assert!(overlap("team-a-x", "team-a-*"));
        assert!(overlap("team-a-x", "team-a-x"));
        assert!(!overlap("team-a-*", "team-b-*"));
        assert!(!overlap("team-a-*", "team-b-x"));
        assert!(!overlap("team-a", "team-a-*"));
        assert!(!overlap("team-a-x", "team-a-y"));
        // A name that merely starts like the prefix, short of it, is not under it.
        assert!(!overlap("team", "team-*"));
    }

    #[test]
    fn within_narrows_a_listing_to_what_the_pattern_can_match() {
        let within = |p: &str, wanted: &str| {
            pattern(p)
                .within(&prefix(wanted))
                .map(|found| found.as_str().to_owned())
        };
        assert_eq!(within("team-a-*", "").as_deref(), Some("team-a-"));
        assert_eq!(within("team-a-*", "team").as_deref(), Some("team-a-"));
        assert_eq!(within("team-a-*", "team-a-x").as_deref(), Some("team-a-x"));
        assert_eq!(within("team-a-*", "team-b"), None);
        assert_eq!(within("deploy", "dep").as_deref(), Some("deploy"));
        assert_eq!(within("deploy", "deploy-x"), None);
        assert_eq!(within("*", "x").as_deref(), Some("x"));
    }
}
