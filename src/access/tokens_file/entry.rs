//! One `[[token]]` entry of a token file ([`FileToken`]): its keys read
//! one by one, every message naming what is wrong and never a token.

use std::time::{Duration, SystemTime};

use toml::{Table, Value};

use crate::access::allow::read_allow;
use crate::access::digest::TokenDigest;
use crate::domain::{Grant, Priority, TokenName};

/// The `by` of a token from `BATON_API_TOKENS` (or its file), which has no
/// name; a token file may not use it.
pub const API_TOKENS_NAME: &str = "BATON_API_TOKENS";
/// The `by` of a token from `BATON_ADMIN_TOKENS` (or its file).
pub const ADMIN_TOKENS_NAME: &str = "BATON_ADMIN_TOKENS";

/// The shortest `value` a file may give: a token an attacker could guess
/// is no token.
pub const MIN_VALUE_LEN: usize = 16;

/// One entry of the file.
#[derive(Debug, Clone)]
pub struct FileToken {
    pub name: TokenName,
    pub digest: TokenDigest,
    pub grants: Vec<Grant>,
    /// After it, the token is refused like a removed one.
    pub expires: Option<SystemTime>,
    /// The highest `priority` it may ask for (9 when absent).
    pub max_priority: Option<Priority>,
}

/// The token of one entry (a table).
///
/// # Errors
/// What is wrong with it, without naming the entry (the caller does).
pub(super) fn read_entry(entry: &Table) -> Result<FileToken, String> {
    for key in entry.keys() {
        if ![
            "name",
            "sha256",
            "value",
            "allow",
            "expires",
            "max_priority",
        ]
        .contains(&key.as_str())
        {
            return Err(format!(
                "unknown key {key:?} (an entry has name, sha256 or value, allow, and may have \
                 expires, max_priority)"
            ));
        }
    }
    let name = match entry.get("name") {
        None => return Err("has no name (the name audit lines show as `by`)".into()),
        Some(Value::String(name)) => TokenName::parse(name).map_err(|err| format!("name {err}"))?,
        Some(_) => return Err("name must be a string".into()),
    };
    if [API_TOKENS_NAME, ADMIN_TOKENS_NAME].contains(&name.as_str()) {
        return Err(format!(
            "name {:?} is what audit lines call the tokens of that variable: choose another",
            name.as_str()
        ));
    }
    let digest = match (entry.get("sha256"), entry.get("value")) {
        (Some(_), Some(_)) => return Err("has both sha256 and value: give one".into()),
        (None, None) => {
            return Err("has neither sha256 (the token's SHA-256 in hex) nor value".into())
        }
        (Some(hex), None) => hex
            .as_str()
            .and_then(TokenDigest::from_hex)
            .ok_or("sha256 must be 64 hexadecimal digits, as sha256sum prints them")?,
        (None, Some(value)) => {
            let value = value.as_str().ok_or("value must be a string")?;
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(
                    "value must be visible ASCII characters, without spaces (as sent after Bearer)"
                        .into(),
                );
            }
            if value.len() < MIN_VALUE_LEN {
                return Err(format!(
                    "value is shorter than {MIN_VALUE_LEN} characters: too easy to guess \
                     (e.g. openssl rand -hex 32)"
                ));
            }
            TokenDigest::of(value.as_bytes())
        }
    };
    let grants = read_allow(entry)?;
    let expires = match entry.get("expires") {
        None => None,
        Some(value) => Some(read_expires(value)?),
    };
    let max_priority = match entry.get("max_priority") {
        None => None,
        Some(value) => Some(
            value
                .as_integer()
                .and_then(|p| u64::try_from(p).ok())
                .and_then(|p| Priority::new(p).ok())
                .ok_or("max_priority must be an integer between 0 and 9")?,
        ),
    };
    Ok(FileToken {
        name,
        digest,
        grants,
        expires,
        max_priority,
    })
}

/// `expires`: an RFC 3339 time, as a string (or TOML's own date-time).
fn read_expires(value: &Value) -> Result<SystemTime, String> {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Datetime(datetime) => datetime.to_string(),
        _ => {
            return Err("expires must be an RFC 3339 time such as \"2026-12-31T00:00:00Z\"".into())
        }
    };
    let at = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| {
        format!("expires = {text:?}: not an RFC 3339 time such as \"2026-12-31T00:00:00Z\"")
    })?;
    let ms =
        u64::try_from(at.timestamp_millis()).map_err(|_| "expires is before 1970".to_owned())?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
}
