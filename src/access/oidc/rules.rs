//! An issuer's rules: which claims a token must carry (`match`), what it
//! may then do (`allow`), and who it is in audit lines and history (`name`,
//! rendered from its claims).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::access::principal::Principal;
use crate::domain::{Grant, TokenName};

/// One `[[issuer.rule]]`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Each claim and the value it must equal exactly (same JSON type).
    pub matches: Vec<(String, Value)>,
    /// The scopes a matching token has, as a token's `allow`.
    pub grants: Vec<Grant>,
    /// Its `by`.
    pub name: Template,
}

impl Rule {
    /// The caller a token with these `claims` is under this rule, if it
    /// matches: every `match` claim equal, and every claim its `name` uses
    /// present (a string, a number or a boolean), rendering a valid name.
    pub fn apply(&self, claims: &Map<String, Value>) -> Option<Arc<Principal>> {
        let matched = self
            .matches
            .iter()
            .all(|(claim, value)| claims.get(claim) == Some(value));
        if !matched {
            return None;
        }
        let name = TokenName::parse(&self.name.render(claims)?).ok()?;
        Some(Arc::new(Principal::new(name, self.grants.clone())))
    }
}

/// A `name` such as `"{repository}@{ref}"`: text, and claims in braces
/// (`{{` and `}}` stand for a brace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Claim(String),
}

impl Template {
    /// # Errors
    /// An unclosed or empty `{}`, a lone `}`, or nothing at all.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.trim().is_empty() {
            return Err("must not be empty".into());
        }
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let mut claim = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some('{') | None => {
                                return Err(format!(
                                    "has an unclosed {{ (claims are written {{claim}}, a brace {{{{): {raw:?}"
                                ))
                            }
                            Some(c) => claim.push(c),
                        }
                    }
                    if claim.trim().is_empty() {
                        return Err(format!("has an empty {{}}: {raw:?}"));
                    }
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Claim(claim));
                }
                '}' => return Err(format!("has a lone }} (write }}}} for a brace): {raw:?}")),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Self(parts))
    }

    /// The name for a token with these `claims`; `None` when a claim it
    /// uses is absent or is not a string, a number or a boolean.
    pub fn render(&self, claims: &Map<String, Value>) -> Option<String> {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Claim(claim) => match claims.get(claim)? {
                    Value::String(text) => out.push_str(text),
                    value @ (Value::Number(_) | Value::Bool(_)) => {
                        out.push_str(&value.to_string());
                    }
                    _ => return None,
                },
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_name_renders_its_claims() {
        let template = Template::parse("{repository}@{ref} #{run_number} {{x}}").unwrap();
        let rendered = template.render(&claims(json!({
            "repository": "acme/app", "ref": "refs/heads/main", "run_number": 42
        })));
        assert_eq!(
            rendered.as_deref(),
            Some("acme/app@refs/heads/main #42 {x}")
        );
        assert_eq!(template.render(&claims(json!({"repository": "a"}))), None);
        for bad in ["", "{repo", "{}", "a}b", "{a{b}}"] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rule_matches_exact_values_of_the_same_type() {
        let rule = Rule {
            matches: vec![
                ("repository".into(), json!("acme/app")),
                ("ref_protected".into(), json!(true)),
            ],
            grants: vec![Grant::parse("write:deploy-app-*").unwrap()],
            name: Template::parse("{repository}").unwrap(),
        };
        let principal = rule
            .apply(&claims(
                json!({"repository": "acme/app", "ref_protected": true, "sub": "x"}),
            ))
            .unwrap();
        assert_eq!(principal.name().unwrap().as_str(), "acme/app");
        assert_eq!(principal.grants()[0].to_string(), "write:deploy-app-*");
        for other in [
            json!({"repository": "acme/app", "ref_protected": "true"}),
            json!({"repository": "acme/app2", "ref_protected": true}),
            json!({"repository": "acme/app"}),
        ] {
            assert!(rule.apply(&claims(other)).is_none());
        }
    }
}
