//! Reading leniently: a value of the wrong type, or one this version does
//! not know (a newer service's `mode`), reads as absent instead of failing
//! the whole body, as RFC 9457 asks of a problem's members; and the defaults
//! that stand for what an absent member meant.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// `object` as a `T`, of the members that each read as one on their own: a
/// member of the wrong type is left out. Every member of `T` must be one it
/// can do without.
///
/// # Errors
/// Only when `T` needs a member.
pub fn ignoring_mistyped<T: DeserializeOwned>(
    object: &Map<String, Value>,
) -> Result<T, serde_json::Error> {
    let readable = object
        .iter()
        .filter(|(key, value)| {
            let alone = Map::from_iter([((*key).clone(), (*value).clone())]);
            T::deserialize(Value::Object(alone)).is_ok()
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    T::deserialize(Value::Object(readable))
}

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
