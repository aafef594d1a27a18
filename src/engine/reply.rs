//! Reading the array replies of our scripts.

use redis::Value;

use super::Error;

/// A script's array reply, read field by field.
pub struct Reply(Vec<Value>);

impl Reply {
    pub fn new(value: Value) -> Result<Self, Error> {
        match value {
            Value::Array(items) => Ok(Self(items)),
            other => Err(Error::Protocol(format!("expected an array, got {other:?}"))),
        }
    }

    pub fn int(&self, i: usize) -> Result<i64, Error> {
        match self.0.get(i) {
            Some(Value::Int(n)) => Ok(*n),
            other => Err(Error::Protocol(format!(
                "field {i}: expected an integer, got {other:?}"
            ))),
        }
    }

    /// A non-negative integer, as Redis replies counts, tokens and times.
    pub fn uint(&self, i: usize) -> Result<u64, Error> {
        u64::try_from(self.int(i)?)
            .map_err(|_| Error::Protocol(format!("field {i}: expected a non-negative integer")))
    }

    pub fn text(&self, i: usize) -> Result<String, Error> {
        match self.0.get(i) {
            Some(Value::BulkString(bytes)) => String::from_utf8(bytes.clone())
                .map_err(|_| Error::Protocol(format!("field {i}: not UTF-8"))),
            Some(Value::SimpleString(s)) => Ok(s.clone()),
            other => Err(Error::Protocol(format!(
                "field {i}: expected text, got {other:?}"
            ))),
        }
    }
}
