//! The name of a lock or semaphore, and a prefix of names for listings.

use std::fmt;

use super::Invalid;

/// The longest name accepted, in characters.
pub const MAX_NAME_LEN: usize = 200;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')
}

/// At most 200 characters, all of them name characters (possibly none).
fn check_name_chars(raw: &str) -> Result<(), Invalid> {
    if raw.chars().count() > MAX_NAME_LEN {
        return Err(Invalid(format!(
            "must be at most {MAX_NAME_LEN} characters"
        )));
    }
    match raw.chars().find(|&c| !is_name_char(c)) {
        Some(bad) => Err(Invalid(format!(
            "may only contain A-Z a-z 0-9 . _ - : (found {bad:?})"
        ))),
        None => Ok(()),
    }
}

/// 1 to 200 characters from `A-Z a-z 0-9 . _ - :`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// # Errors
    /// When the name is empty, too long or has a character outside the set.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() {
            return Err(Invalid("must not be empty".into()));
        }
        check_name_chars(raw)?;
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A possibly empty prefix of names, for `GET /locks?prefix=`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamePrefix(String);

impl NamePrefix {
    /// # Errors
    /// When the prefix is too long or has a character no name can have.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        check_name_chars(raw)?;
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_allowed_character() {
        let name = Name::parse("Deploy-prod_1.eu:west").unwrap();
        assert_eq!(name.as_str(), "Deploy-prod_1.eu:west");
    }

    #[test]
    fn accepts_the_longest_name() {
        assert!(Name::parse(&"a".repeat(200)).is_ok());
    }

    #[test]
    fn refuses_bad_names() {
        let long = "a".repeat(201);
        for bad in ["", long.as_str(), "a b", "a/b", "a*", "{x}", "é", "a\n"] {
            assert!(Name::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn prefix_may_be_empty_but_not_odd() {
        assert_eq!(NamePrefix::parse("").unwrap().as_str(), "");
        assert!(NamePrefix::parse("ci:").is_ok());
        assert!(NamePrefix::parse("ci*").is_err());
        assert!(NamePrefix::parse("[a]").is_err());
    }
}
