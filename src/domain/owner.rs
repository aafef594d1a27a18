//! The optional free-text label that says who holds a lease.

use super::{Invalid, Printable};

/// The longest owner label accepted, in characters.
pub const MAX_OWNER_LEN: usize = 200;

/// At most 200 printable characters; an empty label means "no owner".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

impl Owner {
    /// `None` for a missing or empty label.
    ///
    /// # Errors
    /// When the label is too long or has a character that is not printable.
    pub fn parse(raw: Option<String>) -> Result<Option<Self>, Invalid> {
        let Some(raw) = raw.filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        if raw.chars().count() > MAX_OWNER_LEN {
            return Err(Invalid(format!(
                "must be at most {MAX_OWNER_LEN} characters"
            )));
        }
        if let Some(c) = Printable::Owner.first_refused(&raw) {
            return Err(Invalid(format!(
                "must be printable: U+{:04X} is a control or format character",
                u32::from(c)
            )));
        }
        Ok(Some(Self(raw)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Redis replies carry "" for "no owner".
    pub fn from_stored(raw: String) -> Option<Self> {
        (!raw.is_empty()).then_some(Self(raw))
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_or_missing_is_none() {
        assert_eq!(Owner::parse(None).unwrap(), None);
        assert_eq!(Owner::parse(Some(String::new())).unwrap(), None);
    }

    #[test]
    fn keeps_a_url() {
        let url = "https://ci.example.com/jobs/42".to_string();
        assert_eq!(
            Owner::parse(Some(url.clone())).unwrap().unwrap().as_str(),
            url
        );
    }

    #[test]
    fn refuses_format_characters_and_separators() {
        for bad in [
            "a\u{202E}b",  // right-to-left override
            "a\u{2066}b",  // left-to-right isolate
            "a\u{200B}b",  // zero-width space
            "a\u{2028}b",  // line separator
            "a\u{2029}b",  // paragraph separator
            "a\u{FEFF}b",  // byte-order mark
            "a\u{0085}b",  // next line (a C1 control)
            "a\u{E0041}b", // tag letter
        ] {
            assert!(Owner::parse(Some(bad.into())).is_err(), "{bad:?}");
        }
        for good in ["ci job 42", "Zoë", "東京-deploy", "emoji 🚀", "a\u{00A0}b"] {
            assert!(Owner::parse(Some(good.into())).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn refuses_long_or_control_characters() {
        assert!(Owner::parse(Some("x".repeat(201))).is_err());
        assert!(Owner::parse(Some("a\u{0}b".into())).is_err());
        assert!(Owner::parse(Some("x".repeat(200))).is_ok());
    }
}
