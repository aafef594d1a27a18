//! The optional free-text label that says who holds a lease.

use super::Invalid;

/// The longest owner label accepted, in characters.
pub const MAX_OWNER_LEN: usize = 200;

/// At most 200 characters; an empty label means "no owner".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

impl Owner {
    /// `None` for a missing or empty label.
    ///
    /// # Errors
    /// When the label is too long or has a control character.
    pub fn parse(raw: Option<String>) -> Result<Option<Self>, Invalid> {
        let Some(raw) = raw.filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        if raw.chars().count() > MAX_OWNER_LEN {
            return Err(Invalid(format!(
                "must be at most {MAX_OWNER_LEN} characters"
            )));
        }
        if raw.chars().any(char::is_control) {
            return Err(Invalid("must not contain control characters".into()));
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
    fn refuses_long_or_control_characters() {
        assert!(Owner::parse(Some("x".repeat(201))).is_err());
        assert!(Owner::parse(Some("a\u{0}b".into())).is_err());
        assert!(Owner::parse(Some("x".repeat(200))).is_ok());
    }
}
