//! The optional free-text label that says who holds a lease.

use super::Invalid;

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
        if let Some(c) = raw.chars().find(|c| !is_printable(*c)) {
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

/// Unicode 15.1's `Cf` characters, and U+2028 and U+2029.
const INVISIBLE: &[(char, char)] = &[
    ('\u{00AD}', '\u{00AD}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{06DD}', '\u{06DD}'),
    ('\u{070F}', '\u{070F}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08E2}', '\u{08E2}'),
    ('\u{180E}', '\u{180E}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{2028}', '\u{202E}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFF9}', '\u{FFFB}'),
    ('\u{110BD}', '\u{110BD}'),
    ('\u{110CD}', '\u{110CD}'),
    ('\u{13430}', '\u{1343F}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0001}', '\u{E0001}'),
    ('\u{E0020}', '\u{E007F}'),
];

/// Whether `c` shows as itself: not a control character (Unicode `Cc`), not
/// a format character (`Cf`: bidirectional overrides and isolates, zero-width
/// characters, the byte-order mark, ...), and not a line or paragraph
/// separator (`Zl`, `Zp`). Such characters reorder or hide what a log line or
/// a terminal shows.
pub fn is_printable(c: char) -> bool {
    !c.is_control()
        && !INVISIBLE
            .iter()
            .any(|(from, to)| (*from..=*to).contains(&c))
}

/// [`is_printable`] as a JSON Schema pattern, for the OpenAPI document. The
/// pattern covers the Basic Multilingual Plane (`\uXXXX` escapes); the code
/// also refuses the few invisible characters beyond it.
pub fn printable_pattern() -> String {
    let mut class = String::from(r"\u0000-\u001F\u007F-\u009F");
    for &(from, to) in INVISIBLE.iter().filter(|(_, to)| u32::from(*to) <= 0xFFFF) {
        class.push_str(&format!(r"\u{:04X}", u32::from(from)));
        if to != from {
            class.push_str(&format!(r"-\u{:04X}", u32::from(to)));
        }
    }
    format!("^[^{class}]*$")
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
    fn the_pattern_says_what_the_code_does() {
        let pattern = printable_pattern();
        assert!(pattern.starts_with(r"^[^\u0000-\u001F\u007F-\u009F\u00AD"));
        assert!(pattern.contains(r"\u2028-\u202E") && pattern.contains(r"\uFEFF"));
        assert!(
            !pattern.contains(r"\uE0001"),
            "only \\uXXXX escapes: {pattern}"
        );
    }

    #[test]
    fn refuses_long_or_control_characters() {
        assert!(Owner::parse(Some("x".repeat(201))).is_err());
        assert!(Owner::parse(Some("a\u{0}b".into())).is_err());
        assert!(Owner::parse(Some("x".repeat(200))).is_ok());
    }
}
