//! `[[issuer]]` entries of `BATON_TOKENS_FILE`: whose job tokens are taken,
//! and the rules that map their claims to scopes and to a name.
//!
//! ```toml
//! [[issuer]]
//! url = "https://token.actions.githubusercontent.com"   # the token's `iss`
//! audience = "baton"                                     # its `aud`
//! jwks = "https://token.actions.githubusercontent.com/.well-known/jwks"
//! [[issuer.rule]]
//! match = { repository = "acme/app", ref = "refs/heads/main" }
//! allow = ["write:deploy-app-*"]
//! name = "{repository}@{ref}"
//! ```
//!
//! Messages name the issuer by its `url` (or its number) and the rule by
//! its number, and never quote a value that is not a string.

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::Value as Json;
use toml::{Table, Value};

use super::rules::{Rule, Template};
use crate::access::allow::read_allow;

/// One `[[issuer]]` entry, as read.
#[derive(Debug, Clone)]
pub struct IssuerConfig {
    /// The `iss` its tokens carry, compared exactly.
    pub url: String,
    /// The `aud` its tokens must carry for this service.
    pub audience: String,
    /// Where its signing keys are.
    pub jwks: JwksSource,
    /// Its rules, in the file's order: the first that matches wins.
    pub rules: Vec<Rule>,
}

/// Where an issuer's keys (a JSON Web Key Set) are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// Fetched over HTTP(S).
    Url(reqwest::Url),
    /// Read from a file (air-gapped sites): at load, and again on an unknown key id.
    File(PathBuf),
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Url(url) => write!(f, "{url}"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Reads the `issuer` key of a token file.
///
/// # Errors
/// One line naming the issuer (and the rule) at fault.
pub fn parse_issuers(value: &Value) -> Result<Vec<IssuerConfig>, String> {
    let Value::Array(entries) = value else {
        return Err("issuer must be [[issuer]] entries (an array of tables)".into());
    };
    let mut issuers: Vec<IssuerConfig> = Vec::with_capacity(entries.len());
    let mut seen = HashSet::new();
    for (index, entry) in entries.iter().enumerate() {
        let label = match entry.get("url").and_then(Value::as_str) {
            Some(url) if !url.is_empty() => format!("[[issuer]] {url:?}"),
            _ => format!("[[issuer]] number {}", index + 1),
        };
        let Value::Table(entry) = entry else {
            return Err(format!(
                "{label}: must be a table of url, audience, jwks and [[issuer.rule]] entries"
            ));
        };
        let issuer = read_issuer(entry).map_err(|what| format!("{label}: {what}"))?;
        if !seen.insert(issuer.url.clone()) {
            return Err(format!("{label}: listed twice; list each issuer once"));
        }
        issuers.push(issuer);
    }
    Ok(issuers)
}

fn read_issuer(entry: &Table) -> Result<IssuerConfig, String> {
    for key in entry.keys() {
        if !["url", "audience", "jwks", "rule"].contains(&key.as_str()) {
            return Err(format!(
                "unknown key {key:?} (an issuer has url, audience, jwks and [[issuer.rule]] entries)"
            ));
        }
    }
    let url = string(entry, "url", "the `iss` of its tokens")?;
    let audience = string(entry, "audience", "the `aud` its tokens carry for baton")?;
    let jwks = string(
        entry,
        "jwks",
        "the URL of its keys, or the absolute path of a file that holds them",
    )?;
    let jwks = if jwks.starts_with("https://") || jwks.starts_with("http://") {
        JwksSource::Url(
            reqwest::Url::parse(&jwks).map_err(|err| format!("jwks is not a valid URL ({err})"))?,
        )
    } else if jwks.starts_with('/') {
        JwksSource::File(PathBuf::from(jwks))
    } else {
        return Err("jwks must be an https:// or http:// URL or an absolute file path".into());
    };
    let rules = match entry.get("rule") {
        None => return Err("has no [[issuer.rule]] entries: its tokens could do nothing".into()),
        Some(Value::Array(rules)) if !rules.is_empty() => rules,
        Some(_) => return Err("rule must be [[issuer.rule]] entries (an array of tables)".into()),
    };
    let rules = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let Value::Table(rule) = rule else {
                return Err(format!("[[issuer.rule]] number {}: must be a table", i + 1));
            };
            read_rule(rule).map_err(|what| format!("[[issuer.rule]] number {}: {what}", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(IssuerConfig {
        url,
        audience,
        jwks,
        rules,
    })
}

fn read_rule(rule: &Table) -> Result<Rule, String> {
    for key in rule.keys() {
        if !["match", "allow", "name"].contains(&key.as_str()) {
            return Err(format!(
                "unknown key {key:?} (a rule has match, allow and name)"
            ));
        }
    }
    let matches = match rule.get("match") {
        None => return Err(
            "has no match (e.g. match = { repository = \"acme/app\", ref = \"refs/heads/main\" })"
                .into(),
        ),
        Some(Value::Table(table)) if !table.is_empty() => table,
        Some(Value::Table(_)) => {
            return Err("match is empty: it would take every token of the issuer".into())
        }
        Some(_) => return Err("match must be a table of claim = value".into()),
    };
    let matches = matches
        .iter()
        .map(|(claim, value)| {
            let value = match value {
                Value::String(text) => Json::from(text.clone()),
                Value::Boolean(yes) => Json::from(*yes),
                Value::Integer(number) => Json::from(*number),
                _ => {
                    return Err(format!(
                        "match.{claim} must be a string, a boolean or an integer"
                    ))
                }
            };
            Ok((claim.clone(), value))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let grants = read_allow(rule)?;
    let name = match rule.get("name") {
        None => {
            return Err(
                "has no name (the name audit lines show as `by`, e.g. \"{repository}@{ref}\")"
                    .into(),
            )
        }
        Some(Value::String(name)) => Template::parse(name).map_err(|err| format!("name {err}"))?,
        Some(_) => return Err("name must be a string".into()),
    };
    Ok(Rule {
        matches,
        grants,
        name,
    })
}

fn string(entry: &Table, key: &str, what: &str) -> Result<String, String> {
    match entry.get(key) {
        None => Err(format!("has no {key} ({what})")),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        Some(Value::String(_)) => Err(format!("{key} is empty ({what})")),
        Some(_) => Err(format!("{key} must be a string ({what})")),
    }
}

#[cfg(test)]
mod tests {
    use crate::access::tokens_file::parse_file;

    const ISSUER: &str = r#"
        [[issuer]]
        url = "https://token.actions.githubusercontent.com"
        audience = "baton"
        jwks = "https://token.actions.githubusercontent.com/.well-known/jwks"
        [[issuer.rule]]
        match = { repository = "acme/app", ref = "refs/heads/main" }
        allow = ["write:deploy-app-*"]
        name = "{repository}@{ref}"
        [[issuer.rule]]
        match = { repository_owner = "acme", ref_protected = true }
        allow = ["read:*"]
        name = "acme {repository}"
    "#;

    #[test]
    fn issuers_and_their_rules_are_read_beside_tokens_or_alone() {
        let file = parse_file(ISSUER).unwrap();
        assert!(file.tokens.is_empty());
        let issuer = &file.issuers[0];
        assert_eq!(issuer.url, "https://token.actions.githubusercontent.com");
        assert_eq!(issuer.audience, "baton");
        assert_eq!(issuer.rules.len(), 2);
        assert_eq!(issuer.rules[0].grants[0].to_string(), "write:deploy-app-*");
        let protected = issuer.rules[1]
            .matches
            .iter()
            .find(|(claim, _)| claim == "ref_protected");
        assert_eq!(protected.unwrap().1, serde_json::json!(true));
        let both = parse_file(&format!(
            "{ISSUER}\n[[token]]\nname = \"a\"\nvalue = \"a-long-enough-token\"\nallow = [\"read:*\"]\n"
        ))
        .unwrap();
        assert_eq!((both.tokens.len(), both.issuers.len()), (1, 1));
    }

    #[test]
    fn a_bad_issuer_or_rule_is_named_and_what_is_wrong_said() {
        let issuer = |body: &str| {
            format!("[[issuer]]\nurl = \"https://ci.example\"\naudience = \"baton\"\n{body}\n")
        };
        let rule = "[[issuer.rule]]\nmatch = { repository = \"a/b\" }\nallow = [\"read:*\"]\nname = \"{repository}\"";
        for (text, says) in [
            (issuer(rule), "[[issuer]] \"https://ci.example\": has no jwks"),
            (
                issuer(&format!("jwks = \"relative/keys.json\"\n{rule}")),
                "jwks must be an https:// or http:// URL or an absolute file path",
            ),
            (
                issuer("jwks = \"https://ci.example/keys\""),
                "has no [[issuer.rule]] entries",
            ),
            (
                issuer(&format!("jwks = \"https://ci.example/keys\"\nscopes = 1\n{rule}")),
                "unknown key \"scopes\"",
            ),
            (
                issuer("jwks = \"/k.json\"\n[[issuer.rule]]\nmatch = {}\nallow = [\"read:*\"]\nname = \"x\""),
                "[[issuer.rule]] number 1: match is empty",
            ),
            (
                issuer("jwks = \"/k.json\"\n[[issuer.rule]]\nmatch = { a = \"b\" }\nallow = [\"wirte:*\"]\nname = \"x\""),
                "[[issuer.rule]] number 1: allow[0] = \"wirte:*\"",
            ),
            (
                issuer("jwks = \"/k.json\"\n[[issuer.rule]]\nmatch = { a = \"b\" }\nallow = [\"read:*\"]\nname = \"{repository\""),
                "[[issuer.rule]] number 1: name ",
            ),
            (
                issuer("jwks = \"/k.json\"\n[[issuer.rule]]\nmatch = { a = 1.5 }\nallow = [\"read:*\"]\nname = \"x\""),
                "match.a must be a string, a boolean or an integer",
            ),
            (
                format!("{0}{0}", issuer(&format!("jwks = \"/k.json\"\n{rule}"))),
                "[[issuer]] \"https://ci.example\": listed twice",
            ),
            ("[[issuer]]\naudience = 3".into(), "[[issuer]] number 1: has no url"),
            ("issuer = 1".into(), "issuer must be [[issuer]] entries"),
        ] {
            let err = parse_file(&text).unwrap_err();
            assert!(err.contains(says), "{text}\n=> {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
