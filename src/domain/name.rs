//! The name of a lock or semaphore, and a prefix of names for listings.
//!
//! Names are what CI systems write (`review/app-1`, `org/repo:prod`,
//! `Deploy prod-refs/heads/main`): any printable characters, spaces included.
//! In a URL path they are percent-encoded, a `/` as `%2F`. The names `.` and
//! `..` are the one exception: URL clients resolve them as dot segments
//! (`%2E` included, as the WHATWG URL standard says), so no client could
//! address them reliably.

use std::fmt;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::{Invalid, Printable};

/// The longest name accepted, in characters (Unicode scalar values).
pub const MAX_NAME_LEN: usize = 200;

/// At most 200 characters, all printable as a name may be (possibly none at all).
fn check_name_chars(raw: &str) -> Result<(), Invalid> {
    if raw.chars().count() > MAX_NAME_LEN {
        return Err(Invalid(format!(
            "must be at most {MAX_NAME_LEN} characters"
        )));
    }
    match Printable::Name.first_refused(raw) {
        Some(bad) => Err(Invalid(format!(
            "must be printable text: no control characters, bidirectional \
             overrides or line separators (found U+{:04X})",
            u32::from(bad)
        ))),
        None => Ok(()),
    }
}

/// The characters left as they are in a path segment: RFC 3986 unreserved.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// 1 to 200 printable characters (Unicode scalar values), spaces included.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// # Errors
    /// When the name is empty, `.` or `..`, too long or has a character that
    /// is not printable.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() {
            return Err(Invalid("must not be empty".into()));
        }
        if raw == "." || raw == ".." {
            return Err(Invalid(format!(
                "must not be `{raw}`: URL clients resolve `.` and `..` as dot segments \
                 (even as %2E), so no client could address it"
            )));
        }
        check_name_chars(raw)?;
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as one percent-encoded URL path segment (`review%2Fapp-1`),
    /// for `Location` headers and links.
    pub fn path_segment(&self) -> String {
        utf8_percent_encode(&self.0, PATH_SEGMENT).to_string()
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

/// A possibly empty prefix of names, for `GET /locks?prefix=`. It may hold any
/// character a name may hold, glob characters included: the engine escapes them.
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
    fn accepts_names_as_ci_systems_write_them() {
        for good in [
            "Deploy-prod_1.eu:west",
            "review/app-1",
            "org/repo:prod",
            "Deploy prod-refs/heads/main",
            "déploiement/生产 🚀",
            "glob*?[chars]\\",
            "{braces}",
            "a}",
            "%2F",
            " ",
            "...",
            ". ",
            ".hidden",
        ] {
            assert_eq!(Name::parse(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn counts_characters_not_bytes() {
        assert!(Name::parse(&"a".repeat(200)).is_ok());
        assert!(Name::parse(&"é".repeat(200)).is_ok());
        assert!(Name::parse(&"🚀".repeat(200)).is_ok());
        assert!(Name::parse(&"é".repeat(201)).is_err());
    }

    #[test]
    fn refuses_empty_long_and_unprintable_names() {
        let long = "a".repeat(201);
        for bad in [
            "",
            long.as_str(),
            "a\nb",
            "a\tb",
            "\u{7f}",
            "a\u{0}",
            "a\u{85}",
            "evil\u{202E}txt",
            "a\u{2028}b",
            "\u{2066}x",
        ] {
            assert!(Name::parse(bad).is_err(), "{bad:?} was accepted");
        }
        for dots in [".", ".."] {
            let err = Name::parse(dots).unwrap_err();
            assert!(err.0.contains("dot segment"), "{}", err.0);
        }
        let err = Name::parse("a\u{1b}[31m").unwrap_err();
        assert!(err.0.contains("U+001B"), "{}", err.0);
    }

    #[test]
    fn a_path_segment_encodes_slashes_and_everything_unsafe() {
        let segment = |s: &str| Name::parse(s).unwrap().path_segment();
        assert_eq!(segment("review/app-1"), "review%2Fapp-1");
        assert_eq!(segment("Deploy prod"), "Deploy%20prod");
        assert_eq!(segment("a_b.c~d-e"), "a_b.c~d-e");
        assert_eq!(segment("é?#%"), "%C3%A9%3F%23%25");
    }

    #[test]
    fn prefix_may_be_empty_or_hold_glob_characters() {
        assert_eq!(NamePrefix::parse("").unwrap().as_str(), "");
        assert!(NamePrefix::parse("ci/").is_ok());
        assert!(NamePrefix::parse("ci*").is_ok());
        assert!(NamePrefix::parse("[a]").is_ok());
        assert!(NamePrefix::parse("a\u{7}").is_err());
        assert!(NamePrefix::parse(&"a".repeat(201)).is_err());
    }
}
