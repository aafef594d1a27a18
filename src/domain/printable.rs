//! "Printable", written once, for names and owner labels alike.
//!
//! Neither may hold a control character (Unicode `Cc`), nor one that changes
//! how the text around it shows: bidirectional marks, overrides and
//! isolates, and line and paragraph separators, which reorder or break a log
//! line or a terminal. An owner label, free text shown as it is, also
//! refuses every other format character (`Cf`: zero-width characters, the
//! byte-order mark, tags); a name keeps those, so that emoji joined with
//! U+200D stay usable in names.

/// Characters that reorder or break the text around them when it is shown:
/// the Arabic letter mark, the left-to-right and right-to-left marks, the
/// line and paragraph separators, the embeddings and overrides, and the
/// isolates. Each is also in [`INVISIBLE`].
const REORDERING: &[(char, char)] = &[
    ('\u{061C}', '\u{061C}'),
    ('\u{200E}', '\u{200E}'),
    ('\u{200F}', '\u{200F}'),
    ('\u{2028}', '\u{202E}'),
    ('\u{2066}', '\u{2069}'),
];

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

/// Whose text is judged: the one rule, at its two strictnesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printable {
    /// A lock's or semaphore's name (or a prefix of names): no control
    /// character, nothing that reorders or breaks the text.
    Name,
    /// An owner label: besides, no format character at all.
    Owner,
}

impl Printable {
    /// The characters refused beyond the control characters.
    const fn refused(self) -> &'static [(char, char)] {
        match self {
            Self::Name => REORDERING,
            Self::Owner => INVISIBLE,
        }
    }

    /// Whether `c` may stand in such text.
    pub fn allows(self, c: char) -> bool {
        !c.is_control()
            && !self
                .refused()
                .iter()
                .any(|(from, to)| (*from..=*to).contains(&c))
    }

    /// The first character of `text` that may not stand in it, if any.
    pub fn first_refused(self, text: &str) -> Option<char> {
        text.chars().find(|&c| !self.allows(c))
    }

    /// The refused characters as the inside of a negated JSON Schema
    /// character class (`^[^...]*$`), for the OpenAPI document. It covers the
    /// Basic Multilingual Plane (`\uXXXX` escapes); the code also refuses the
    /// few characters beyond it.
    pub fn refused_class(self) -> String {
        let mut class = String::from(r"\u0000-\u001F\u007F-\u009F");
        for &(from, to) in self
            .refused()
            .iter()
            .filter(|(_, to)| u32::from(*to) <= 0xFFFF)
        {
            class.push_str(&format!(r"\u{:04X}", u32::from(from)));
            if to != from {
                class.push_str(&format!(r"-\u{:04X}", u32::from(to)));
            }
        }
        class
    }
}

/// [`Printable::Owner`] as a JSON Schema pattern, for the OpenAPI document.
pub fn printable_pattern() -> String {
    format!("^[^{}]*$", Printable::Owner.refused_class())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neither_allows_control_characters() {
        for rule in [Printable::Name, Printable::Owner] {
            for c in ['\u{0}', '\n', '\t', '\u{1B}', '\u{7F}', '\u{85}', '\u{9F}'] {
                assert!(!rule.allows(c), "{rule:?} allows {c:?}");
            }
        }
    }

    #[test]
    fn neither_allows_what_reorders_or_breaks_the_text() {
        for rule in [Printable::Name, Printable::Owner] {
            for c in ['\u{061C}', '\u{200E}', '\u{200F}', '\u{2028}', '\u{2029}'] {
                assert!(!rule.allows(c), "{rule:?} allows U+{:04X}", u32::from(c));
            }
            for c in ('\u{202A}'..='\u{202E}').chain('\u{2066}'..='\u{2069}') {
                assert!(!rule.allows(c), "{rule:?} allows U+{:04X}", u32::from(c));
            }
        }
    }

    #[test]
    fn only_an_owner_refuses_the_other_format_characters() {
        for c in [
            '\u{00AD}',
            '\u{200B}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{E0041}',
        ] {
            assert!(Printable::Name.allows(c), "U+{:04X}", u32::from(c));
            assert!(!Printable::Owner.allows(c), "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn both_allow_text_as_people_write_it() {
        for rule in [Printable::Name, Printable::Owner] {
            let text = "Deploy prod-refs/heads/main Zoë 東京 🚀 a\u{00A0}b {}*?[]\\%";
            assert_eq!(rule.first_refused(text), None, "{rule:?}");
        }
    }

    #[test]
    fn what_a_name_refuses_an_owner_refuses_too() {
        for &(from, to) in REORDERING {
            for c in from..=to {
                assert!(!Printable::Owner.allows(c), "U+{:04X}", u32::from(c));
            }
        }
    }

    #[test]
    fn first_refused_names_the_first() {
        assert_eq!(Printable::Name.first_refused("ab\u{7}c\n"), Some('\u{7}'));
        assert_eq!(
            Printable::Owner.first_refused("a\u{200B}b"),
            Some('\u{200B}')
        );
        assert_eq!(Printable::Name.first_refused("a\u{200B}b"), None);
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
        assert_eq!(
            Printable::Name.refused_class(),
            r"\u0000-\u001F\u007F-\u009F\u061C\u200E\u200F\u2028-\u202E\u2066-\u2069"
        );
    }
}
