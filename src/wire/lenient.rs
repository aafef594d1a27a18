//! Reading a member leniently: a value of the wrong type, or one this version
//! does not know (a newer service's `mode`), reads as absent instead of
//! failing the whole body, as RFC 9457 asks of a problem's members.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// For `#[serde(default, deserialize_with = "or_absent")]`: the member, or
/// its default (`None`, `""`, 0) when it is not a `T`.
///
/// # Errors
/// Only when the input is not JSON at all.
pub fn or_absent<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// A lease's permits when a body does not say: 1, what every lease took
/// before permits existed.
pub fn one_permit() -> u64 {
    1
}
