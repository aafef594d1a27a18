//! The name of an API token, never the token: who made a change, as audit
//! lines and history show it (`by`).

use std::fmt;
use std::sync::Arc;

use super::{Invalid, Printable};

/// The longest token name accepted, in characters.
pub const MAX_TOKEN_NAME_LEN: usize = 200;

/// 1 to 200 printable characters (as an owner label may hold), e.g.
/// `team-a-ci`. Cheap to clone: every request made with the token carries it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenName(Arc<str>);

impl TokenName {
    /// # Errors
    /// When the name is empty, too long, or has a character that is not printable.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.trim().is_empty() {
            return Err(Invalid("must not be empty".into()));
        }
        if raw.chars().count() > MAX_TOKEN_NAME_LEN {
            return Err(Invalid(format!(
                "must be at most {MAX_TOKEN_NAME_LEN} characters"
            )));
        }
        if let Some(c) = Printable::Owner.first_refused(raw) {
            return Err(Invalid(format!(
                "must be printable: U+{:04X} is a control or format character",
                u32::from(c)
            )));
        }
        Ok(Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TokenName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TokenName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_printable_text() {
        assert_eq!(TokenName::parse("team-a-ci").unwrap().as_str(), "team-a-ci");
        assert!(TokenName::parse("CI of team A").is_ok());
        for bad in ["", "  ", "a\nb", "a\u{202E}b", "a\u{200B}b"] {
            assert!(TokenName::parse(bad).is_err(), "{bad:?}");
        }
        assert!(TokenName::parse(&"n".repeat(200)).is_ok());
        assert!(TokenName::parse(&"n".repeat(201)).is_err());
    }
}
