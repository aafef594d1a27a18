//! The one way the bodies on the wire write a time: RFC 3339 UTC with
//! milliseconds ([`rfc3339_ms`]).

/// RFC 3339 UTC with milliseconds, from milliseconds since the Unix epoch.
pub fn rfc3339_ms(epoch_ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(epoch_ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// [`rfc3339_ms`] of a signed Redis time; one before the epoch reads as the epoch.
pub fn rfc3339_ms_signed(epoch_ms: i64) -> String {
    rfc3339_ms(u64::try_from(epoch_ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_redis_time_as_rfc3339() {
        assert_eq!(
            super::rfc3339_ms(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(super::rfc3339_ms_signed(-5), "1970-01-01T00:00:00.000Z");
    }
}
