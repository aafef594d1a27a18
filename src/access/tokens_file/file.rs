//! A token file as a whole ([`TokenFile`]): its TOML, its top-level keys,
//! and entries that name each token once under a name of its own.

use std::collections::HashMap;
use std::path::Path;

use toml::{Table, Value};

use super::entry::{read_entry, FileToken};
use crate::access::digest::TokenDigest;
use crate::access::oidc::config::{self, IssuerConfig};
use crate::domain::TokenName;

/// What a token file holds: named tokens, and issuers of job tokens.
#[derive(Debug, Default)]
pub struct TokenFile {
    pub tokens: Vec<FileToken>,
    pub issuers: Vec<IssuerConfig>,
    /// Whether an entry gives its token in plain text (`value`): such a file
    /// must not be readable by group or others.
    pub has_values: bool,
}

/// Reads and parses the file at `path`.
///
/// # Errors
/// One line saying what is wrong, naming the entry at fault.
pub fn read(path: &Path) -> Result<TokenFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("a readable TOML file of [[token]] entries ({err})"))?;
    parse_file(&text)
}

/// Parses the text of a token file: its `[[token]]` entries.
///
/// # Errors
/// One line saying what is wrong, naming the entry at fault.
pub fn parse(text: &str) -> Result<Vec<FileToken>, String> {
    parse_file(text).map(|file| file.tokens)
}

/// Parses the text of a token file, `[[issuer]]` entries included.
///
/// # Errors
/// One line saying what is wrong, naming the entry at fault.
pub fn parse_file(text: &str) -> Result<TokenFile, String> {
    let table: Table = text.parse().map_err(|err: toml::de::Error| {
        // The message only, never the snippet of the line it quotes (which
        // may hold a token).
        let line = err.span().map_or(1, |span| {
            text[..span.start.min(text.len())].matches('\n').count() + 1
        });
        format!(
            "line {line}: not valid TOML ({})",
            first_line(err.message())
        )
    })?;
    for key in table.keys() {
        if key != "token" && key != "issuer" {
            return Err(format!(
                "unknown key {key:?} at the top: only [[token]] and [[issuer]] entries are read"
            ));
        }
    }
    let issuers = match table.get("issuer") {
        None => Vec::new(),
        Some(issuers) => config::parse_issuers(issuers)?,
    };
    let empty = Vec::new();
    let entries = match table.get("token") {
        None => &empty,
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err("token must be [[token]] entries (an array of tables)".into()),
    };
    if entries.is_empty() && issuers.is_empty() {
        return Err("no [[token]] entries (nor [[issuer]] entries)".into());
    }
    let mut tokens: Vec<FileToken> = Vec::with_capacity(entries.len());
    let mut seen: HashMap<TokenDigest, usize> = HashMap::with_capacity(entries.len());
    let mut names: HashMap<TokenName, usize> = HashMap::with_capacity(entries.len());
    let mut has_values = false;
    for (index, entry) in entries.iter().enumerate() {
        let label = label(index, entry);
        let Value::Table(entry) = entry else {
            return Err(format!(
                "{label}: must be a table of name, sha256 or value, allow"
            ));
        };
        let token = read_entry(entry).map_err(|what| format!("{label}: {what}"))?;
        if let Some(&earlier) = seen.get(&token.digest) {
            return Err(format!(
                "{label}: the same token as {}; list each token once",
                label_of(&tokens[earlier].name)
            ));
        }
        if names.contains_key(&token.name) {
            return Err(format!(
                "{label}: two entries have this name; each token needs a name of its own \
                 (audit lines and history tell tokens apart by it)"
            ));
        }
        has_values |= entry.contains_key("value");
        seen.insert(token.digest, index);
        names.insert(token.name.clone(), index);
        tokens.push(token);
    }
    Ok(TokenFile {
        tokens,
        issuers,
        has_values,
    })
}

/// How an entry is named in messages: `[[token]] "team-a-ci"`, or by its
/// number (from 1) when it has no usable name.
fn label(index: usize, entry: &Value) -> String {
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .and_then(|name| TokenName::parse(name).ok());
    match name {
        Some(name) => label_of(&name),
        None => format!("[[token]] number {}", index + 1),
    }
}

fn label_of(name: &TokenName) -> String {
    format!("[[token]] {:?}", name.as_str())
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text).trim()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::domain::{Priority, Scope};

    const SECRET: &str = "s3cret-token-never-shown";

    fn error(text: &str) -> String {
        let err = parse(text).unwrap_err();
        assert!(!err.contains(SECRET), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
        err
    }

    #[test]
    fn entries_are_read_with_their_names_digests_and_grants() {
        let tokens = parse(&format!(
            r#"
            [[token]]
            name = "team-a-ci"
            sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            allow = ["write:team-a-*", "read:*"]

            [[token]]
            name = "dashboard"
            value = "{SECRET}"
            allow = ["read:*"]
            "#
        ))
        .unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens[0].name.as_str(), "team-a-ci");
        assert!(tokens[0].digest.same_as(&TokenDigest::of(b"test")));
        assert_eq!(tokens[0].grants[0].scope, Scope::Write);
        assert_eq!(tokens[0].grants[1].to_string(), "read:*");
        assert!(tokens[1]
            .digest
            .same_as(&TokenDigest::of(SECRET.as_bytes())));
        assert!(!format!("{tokens:?}").contains(SECRET));
    }

    #[test]
    fn a_bad_entry_is_named_and_what_is_wrong_said() {
        let entry = |body: &str| format!("[[token]]\n{body}\n");
        let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        for (text, says) in [
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET}\"\nallow = [\"wirte:x-*\"]"
                )),
                "[[token]] \"a\": allow[0] = \"wirte:x-*\": \"wirte\" is not a scope",
            ),
            (
                entry(&format!("value = \"{SECRET}\"\nallow = [\"read:*\"]")),
                "[[token]] number 1: has no name",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET}\"\nsha256 = \"{hex}\"\nallow = [\"read:*\"]"
                )),
                "[[token]] \"a\": has both sha256 and value",
            ),
            (
                entry("name = \"a\"\nallow = [\"read:*\"]"),
                "[[token]] \"a\": has neither sha256",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nsha256 = \"{SECRET}\"\nallow = [\"read:*\"]"
                )),
                "[[token]] \"a\": sha256 must be 64 hexadecimal digits",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET} x\"\nallow = [\"read:*\"]"
                )),
                "[[token]] \"a\": value must be visible ASCII",
            ),
            (
                entry(&format!("name = \"a\"\nvalue = \"{SECRET}\"")),
                "[[token]] \"a\": has no allow",
            ),
            (
                entry(&format!("name = \"a\"\nvalue = \"{SECRET}\"\nallow = []")),
                "[[token]] \"a\": allow is empty",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET}\"\nallow = \"read:*\""
                )),
                "[[token]] \"a\": allow must be an array",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET}\"\nalow = [\"read:*\"]"
                )),
                "[[token]] \"a\": unknown key \"alow\"",
            ),
            (
                entry(&format!(
                    "name = 7\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]"
                )),
                "[[token]] number 1: name must be a string",
            ),
            (
                entry(&format!(
                    "name = \"BATON_API_TOKENS\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]"
                )),
                "choose another",
            ),
            (
                format!(
                    "{}{}",
                    entry(&format!(
                        "name = \"first\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]"
                    )),
                    entry(&format!(
                        "name = \"second\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]"
                    )),
                ),
                "[[token]] \"second\": the same token as [[token]] \"first\"",
            ),
            (
                format!(
                    "{}{}",
                    entry(&format!(
                        "name = \"team\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]"
                    )),
                    entry(&format!(
                        "name = \"team\"\nvalue = \"{SECRET}-2\"\nallow = [\"admin:*\"]"
                    )),
                ),
                "[[token]] \"team\": two entries have this name",
            ),
            (
                entry("name = \"short\"\nvalue = \"a\"\nallow = [\"admin:*\"]"),
                "[[token]] \"short\": value is shorter than 16 characters",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]\nexpires = \"tomorrow\""
                )),
                "[[token]] \"a\": expires = \"tomorrow\": not an RFC 3339 time",
            ),
            (
                entry(&format!(
                    "name = \"a\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]\nmax_priority = 10"
                )),
                "[[token]] \"a\": max_priority must be an integer between 0 and 9",
            ),
            (String::new(), "no [[token]] entries"),
            ("tokens = 1".into(), "unknown key \"tokens\" at the top"),
            ("token = 1".into(), "token must be [[token]] entries"),
        ] {
            let err = error(&text);
            assert!(err.contains(says), "{text}\n=> {err}");
        }
    }

    #[test]
    fn expires_and_max_priority_are_read() {
        let file = parse_file(&format!(
            "[[token]]\nname = \"a\"\nvalue = \"{SECRET}\"\nallow = [\"read:*\"]\n\
             expires = \"2030-01-02T03:04:05Z\"\nmax_priority = 3\n\
             [[token]]\nname = \"b\"\nsha256 = \"{}\"\nallow = [\"read:*\"]\n\
             expires = 2030-01-02T03:04:05Z\n",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        ))
        .unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_553_445);
        assert_eq!(file.tokens[0].expires, Some(at));
        assert_eq!(file.tokens[0].max_priority, Some(Priority::new(3).unwrap()));
        assert_eq!(file.tokens[1].expires, Some(at));
        assert_eq!(file.tokens[1].max_priority, None);
        assert!(file.has_values);
    }

    #[test]
    fn a_value_of_the_wrong_type_is_never_quoted() {
        let err = error("[[token]]\nname = \"a\"\nvalue = 123456789\nallow = [\"read:*\"]");
        assert!(
            err.contains("value must be a string") && !err.contains("123456789"),
            "{err}"
        );
        let err = error("[[token]]\nname = \"a\"\nsha256 = 123456789\nallow = [\"read:*\"]");
        assert!(!err.contains("123456789"), "{err}");
    }

    #[test]
    fn broken_toml_names_the_line_and_never_shows_it() {
        for text in [
            format!("[[token]]\nname = \"a\"\nvalue = \"{SECRET}\nallow = [\"read:*\"]"),
            format!("[[token]]\nname = \"a\"\nvalue = {SECRET}\n"),
            format!("[[token]]\nname = \"a\"\nvalue = \"{SECRET}\" \"again\"\n"),
            format!("[[token]]\nname = \"a\"\nvalue = '''{SECRET}\n"),
            format!("[[token]]\nname = \"a\"\nvalue = \"x\"\nvalue = \"{SECRET}\"\n"),
        ] {
            let err = error(&text);
            assert!(
                err.starts_with("line 3: not valid TOML")
                    || err.starts_with("line 4: not valid TOML"),
                "{err}"
            );
        }
    }
}
