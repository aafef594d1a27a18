//! The `allow` of a tokens file's entry, read one way for a token's and
//! for an issuer's rule's (`oidc/config.rs`).

use toml::{Table, Value};

use crate::domain::Grant;

/// The `allow` of an entry (a token's, or an issuer's rule's): scopes such
/// as `"write:team-a-*"`.
///
/// # Errors
/// One phrase saying what is wrong, never quoting a value that is not a string.
pub(in crate::access) fn read_allow(entry: &Table) -> Result<Vec<Grant>, String> {
    let allow = match entry.get("allow") {
        None => return Err("has no allow (e.g. allow = [\"write:team-a-*\", \"read:*\"])".into()),
        Some(Value::Array(allow)) => allow,
        Some(_) => {
            return Err("allow must be an array of strings such as \"write:team-a-*\"".into())
        }
    };
    if allow.is_empty() {
        return Err("allow is empty: the token could do nothing".into());
    }
    allow
        .iter()
        .enumerate()
        .map(|(i, grant)| {
            let text = grant
                .as_str()
                .ok_or_else(|| format!("allow[{i}] must be a string such as \"read:*\""))?;
            Grant::parse(text).map_err(|err| format!("allow[{i}] = {text:?}: {err}"))
        })
        .collect::<Result<Vec<_>, _>>()
}
