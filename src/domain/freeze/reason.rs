//! Why: the reason a freeze gives, or the reason an administrator gives to be
//! granted through one (`override`), shown and audited as it is.

use super::super::{Invalid, Printable};

/// The longest reason accepted, in characters.
pub const MAX_REASON_LEN: usize = 200;

/// At most 200 printable characters (an owner label's rule), not empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(String);

impl Reason {
    /// # Errors
    /// When the text is empty, too long or has a character that is not printable.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.trim().is_empty() {
            return Err(Invalid("must not be empty".into()));
        }
        if raw.chars().count() > MAX_REASON_LEN {
            return Err(Invalid(format!(
                "must be at most {MAX_REASON_LEN} characters"
            )));
        }
        if let Some(c) = Printable::Owner.first_refused(raw) {
            return Err(Invalid(format!(
                "must be printable: U+{:04X} is a control or format character",
                u32::from(c)
            )));
        }
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
    fn a_reason_is_printable_text_of_at_most_200_characters() {
        assert_eq!(
            Reason::parse("incident 42").unwrap().as_str(),
            "incident 42"
        );
        assert!(Reason::parse("").is_err());
        assert!(Reason::parse("  ").is_err());
        assert!(Reason::parse("a\nb").is_err());
        assert!(Reason::parse(&"é".repeat(200)).is_ok());
        assert!(Reason::parse(&"é".repeat(201)).is_err());
    }
}
