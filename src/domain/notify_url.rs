//! `notify`: where a ticket's turn notice goes (docs/tickets.md), an http or
//! https URL whose host the service's `BATON_WEBHOOK_HOSTS` lists.

use std::fmt;
use std::sync::Arc;

use super::Invalid;

/// The longest `notify` URL accepted, in bytes.
pub const MAX_NOTIFY_URL_LEN: usize = 2000;

/// A turn notice's URL, checked against the hosts the service may notify.
/// Cheap to clone, and one pointer wide: a waiting request keeps it for its
/// whole wait.
#[derive(Clone, PartialEq, Eq)]
pub struct NotifyUrl(Arc<String>);

impl NotifyUrl {
    /// `raw` when it is an absolute http or https URL whose host is one of
    /// `hosts` (compared without case); with no hosts, notices are off and
    /// every URL is refused.
    ///
    /// # Errors
    /// [`Invalid`] saying which rule `raw` breaks.
    pub fn parse(raw: &str, hosts: &[String]) -> Result<Self, Invalid> {
        if hosts.is_empty() {
            return Err(Invalid(
                "turn notices are off on this service (its BATON_WEBHOOK_HOSTS is unset)".into(),
            ));
        }
        if raw.len() > MAX_NOTIFY_URL_LEN {
            return Err(Invalid(format!("at most {MAX_NOTIFY_URL_LEN} bytes")));
        }
        let url = url::Url::parse(raw).map_err(|err| Invalid(format!("not a URL ({err})")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Invalid("must be an http or https URL".into()));
        }
        let host = url.host_str().unwrap_or_default();
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(Invalid(format!(
                "the host {host:?} is not one this service may notify (BATON_WEBHOOK_HOSTS)"
            )));
        }
        Ok(Self(Arc::new(url.as_str().to_owned())))
    }

    /// The URL, to send the notice to (and to keep with the ticket).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The host only: a URL may carry a secret in its path or query.
impl fmt::Debug for NotifyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = url::Url::parse(&self.0)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        write!(f, "NotifyUrl({host}/…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec!["hooks.example.com".into(), "127.0.0.1".into()]
    }

    #[test]
    fn a_listed_host_over_http_or_https_is_accepted() {
        for raw in [
            "https://hooks.example.com/baton?x=1",
            "http://127.0.0.1:8080/hook",
            "https://HOOKS.example.com/",
        ] {
            assert!(NotifyUrl::parse(raw, &hosts()).is_ok(), "{raw}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for raw in [
            "https://evil.example.com/",
            "ftp://hooks.example.com/",
            "file:///etc/passwd",
            "hooks.example.com/path",
            "https://hooks.example.com.evil.net/",
            "",
        ] {
            assert!(NotifyUrl::parse(raw, &hosts()).is_err(), "{raw}");
        }
    }

    #[test]
    fn with_no_hosts_notices_are_off() {
        let err = NotifyUrl::parse("https://hooks.example.com/", &[]).unwrap_err();
        assert!(err.0.contains("BATON_WEBHOOK_HOSTS"), "{err}");
    }
}
