//! Why someone asks a holder to finish early: a free-text reason, as
//! printable and as short as an owner label.

use super::{Invalid, Owner};

/// At most 200 printable characters; an empty reason means "none given".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(String);

impl Reason {
    /// `None` for a missing or empty reason.
    ///
    /// # Errors
    /// When the reason is too long or has a character that is not printable
    /// (the rules of an [`Owner`] label).
    pub fn parse(raw: Option<String>) -> Result<Option<Self>, Invalid> {
        Ok(Owner::parse(raw)?.map(|text| Self(text.into_string())))
    }

    /// A reason as the line passes it on ("" for none).
    pub fn from_stored(raw: String) -> Option<Self> {
        (!raw.is_empty()).then_some(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_printable_text_of_at_most_200_characters() {
        assert_eq!(Reason::parse(None).unwrap(), None);
        assert_eq!(Reason::parse(Some(String::new())).unwrap(), None);
        let r = Reason::parse(Some("release train at 5".into())).unwrap();
        assert_eq!(
            r.map(Reason::into_string).as_deref(),
            Some("release train at 5")
        );
        assert!(Reason::parse(Some("a\nb".into())).is_err());
        assert!(Reason::parse(Some("x".repeat(201))).is_err());
    }
}
