//! Reading a function's array reply in order, in the manner of mini-redis's
//! `Parse`: each field is taken once, as the type it must be, and
//! [`Cursor::finish`] rejects a reply with fields left over, so a reply whose
//! shape drifted from its decoder is an error, never misread.

use std::time::Duration;

use redis::Value;

use crate::domain::Owner;
use crate::engine::error::Error;
use crate::engine::model::Occupancy;

/// A function's reply, read field by field from the front.
pub(in crate::engine) struct Cursor {
    fields: std::vec::IntoIter<Value>,
    /// The index of the next field, for error messages.
    at: usize,
}

impl Cursor {
    /// # Errors
    /// [`Error::Protocol`] unless `value` is an array.
    pub(in crate::engine) fn new(value: Value) -> Result<Self, Error> {
        match value {
            Value::Array(items) => Ok(Self {
                fields: items.into_iter(),
                at: 0,
            }),
            other => Err(Error::Protocol(format!("expected an array, got {other:?}"))),
        }
    }

    fn next(&mut self) -> Result<Value, Error> {
        let at = self.at;
        self.at += 1;
        self.fields
            .next()
            .ok_or_else(|| Error::Protocol(format!("field {at}: missing")))
    }

    fn wrong(&self, expected: &str, got: &Value) -> Error {
        Error::Protocol(format!(
            "field {}: expected {expected}, got {got:?}",
            self.at - 1
        ))
    }

    /// An integer: an integer reply, or the digits a function passes on as
    /// they are stored (a fast path spares itself the conversion).
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is an integer.
    pub(in crate::engine) fn int(&mut self) -> Result<i64, Error> {
        match self.next()? {
            Value::Int(n) => Ok(n),
            Value::BulkString(digits) => std::str::from_utf8(&digits)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| self.wrong("an integer", &Value::BulkString(digits))),
            other => Err(self.wrong("an integer", &other)),
        }
    }

    /// A non-negative integer, as functions reply counts, tokens and times.
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is one.
    pub(in crate::engine) fn uint(&mut self) -> Result<u64, Error> {
        let n = self.int()?;
        u64::try_from(n).map_err(|_| {
            Error::Protocol(format!(
                "field {}: expected a non-negative integer, got {n}",
                self.at - 1
            ))
        })
    }

    /// A count of the items that follow, as a length.
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is one.
    pub(in crate::engine) fn count(&mut self) -> Result<usize, Error> {
        usize::try_from(self.uint()?).map_err(|_| Error::Protocol("count too large".into()))
    }

    /// A flag: 1 or 0.
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is 0 or 1.
    pub(in crate::engine) fn flag(&mut self) -> Result<bool, Error> {
        match self.int()? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(Error::Protocol(format!(
                "field {}: expected 0 or 1, got {n}",
                self.at - 1
            ))),
        }
    }

    /// # Errors
    /// [`Error::Protocol`] unless the next field is UTF-8 text.
    pub(in crate::engine) fn text(&mut self) -> Result<String, Error> {
        match self.next()? {
            Value::BulkString(bytes) => String::from_utf8(bytes)
                .map_err(|_| Error::Protocol(format!("field {}: not UTF-8", self.at - 1))),
            Value::SimpleString(s) => Ok(s),
            other => Err(self.wrong("text", &other)),
        }
    }

    /// An owner as the line stores it ("" for none).
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is text.
    pub(in crate::engine) fn owner(&mut self) -> Result<Option<Owner>, Error> {
        Ok(Owner::from_stored(self.text()?))
    }

    /// Milliseconds from now, -1 for "none".
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is an integer.
    pub(in crate::engine) fn expiry(&mut self) -> Result<Option<Duration>, Error> {
        let ms = self.int()?;
        Ok(u64::try_from(ms).ok().map(Duration::from_millis))
    }

    /// A time left in milliseconds, never negative.
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next field is an integer.
    pub(in crate::engine) fn time_left(&mut self) -> Result<Duration, Error> {
        Ok(Duration::from_millis(self.int()?.max(0).unsigned_abs()))
    }

    /// How busy a name is, as a function that refuses (or gives up) reports
    /// it: `holders, used, waiting, expires_in_ms, owner`.
    ///
    /// # Errors
    /// [`Error::Protocol`] unless the next fields are that.
    pub(in crate::engine) fn occupancy(&mut self) -> Result<Occupancy, Error> {
        Ok(Occupancy {
            holders: self.uint()?,
            used: self.uint()?,
            waiting: self.uint()?,
            next_expiry_in: self.expiry()?,
            owner: self.owner()?,
        })
    }

    /// Whether every field was read (a reply whose last fields are
    /// optional).
    pub(in crate::engine) fn is_empty(&self) -> bool {
        self.fields.len() == 0
    }

    /// The end of the reply.
    ///
    /// # Errors
    /// [`Error::Protocol`] when fields are left over.
    pub(in crate::engine) fn finish(mut self) -> Result<(), Error> {
        match self.fields.next() {
            None => Ok(()),
            Some(_) => Err(Error::Protocol(format!(
                "{} fields left over from field {}",
                self.fields.len() + 1,
                self.at
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(fields: Vec<Value>) -> Cursor {
        Cursor::new(Value::Array(fields)).expect("an array")
    }

    #[test]
    fn fields_are_read_in_order_and_the_end_is_checked() {
        let mut cursor = reply(vec![
            Value::Int(3),
            Value::BulkString(b"ci".to_vec()),
            Value::Int(-1),
        ]);
        assert_eq!(cursor.uint().unwrap(), 3);
        assert_eq!(cursor.text().unwrap(), "ci");
        assert_eq!(cursor.expiry().unwrap(), None);
        assert!(cursor.finish().is_ok());
    }

    #[test]
    fn leftover_fields_are_an_error() {
        let mut cursor = reply(vec![Value::Int(1), Value::Int(2)]);
        cursor.int().unwrap();
        assert!(matches!(cursor.finish(), Err(Error::Protocol(_))));
    }

    #[test]
    fn a_missing_or_mistyped_field_is_an_error() {
        let mut cursor = reply(vec![Value::BulkString(b"x".to_vec())]);
        assert!(matches!(cursor.int(), Err(Error::Protocol(_))));
        assert!(matches!(cursor.int(), Err(Error::Protocol(_))));
        assert!(reply(vec![Value::Int(-2)]).uint().is_err());
        assert!(reply(vec![Value::Int(2)]).flag().is_err());
        assert!(Cursor::new(Value::Int(1)).is_err());
    }
}
