//! The one HTTP client of the client commands: reqwest (HTTP/1.1, HTTP/2 over
//! TLS where the service offers it, rustls with ring, proxies from the usual
//! variables). One call at a time, each with its own time limit; an answer is
//! its status and its JSON body ([`crate::cli::answer::Answer`]), which says
//! what it means and reads as the [`crate::wire`] body it should be. Neither the token nor a URL (which can hold a lease id) ever appears
//! in a message.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde::Serialize;
use serde_json::Value;

use crate::cli::answer::{unreachable, Answer};
use crate::cli::exit::{Failure, UNAVAILABLE, USAGE};

/// A request body as JSON.
///
/// # Panics
/// Never: a body of the wire is plain JSON, with string keys only.
pub fn json(body: &impl Serialize) -> Value {
    serde_json::to_value(body).expect("a body of the wire is plain JSON")
}

/// Why a call got no answer (no URL in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoAnswer {
    pub why: String,
    /// No connection could be made at all: refused, no such host, no route;
    /// or one was, and what answered there does not speak HTTP.
    pub connect: bool,
}

/// Whether `err` says that what is at `--url` does not speak HTTP: it
/// answered something that is not HTTP (an SSH or TLS server's greeting, a
/// Redis error: before the request was sent, hyper calls that an unexpected
/// message, which it has no predicate for), or closed the connection
/// without answering (as Redis does when it reads an HTTP request). Waiting
/// will not make it speak HTTP.
fn speaks_no_http(err: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>() {
            if hyper.is_parse()
                || hyper.is_incomplete_message()
                || hyper.to_string().contains("unexpected message")
            {
                return true;
            }
        }
        source = cause.source();
    }
    false
}

/// The reason of a call that failed with `err` at `base`, and whether it
/// failed for lack of a connection (or of HTTP on it).
fn no_answer(base: &str, err: &reqwest::Error, timeout: Option<Duration>) -> NoAnswer {
    let no_http = speaks_no_http(err);
    let connect = err.is_connect() || no_http;
    let mut why = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        why = format!("{why}: {cause}");
        source = cause.source();
    }
    if let (true, Some(timeout)) = (err.is_timeout(), timeout) {
        why = format!("no answer within {}", crate::cli::duration::human(timeout));
    }
    if no_http {
        why = format!("{base} does not speak HTTP ({why})");
    } else {
        why = format!("cannot reach {base}: {why}");
    }
    NoAnswer { why, connect }
}

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// The service at `--url`, with the token to send.
#[derive(Clone)]
pub struct Service {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// Whether the service has answered a call of this process yet.
    answered: Arc<AtomicBool>,
}

impl Service {
    /// # Errors
    /// A URL that is not http:// or https:// (exit 64).
    pub fn new(url: &str, token: Option<&str>) -> Result<Self, Failure> {
        let base = url.trim().trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base).ok();
        if !parsed.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host()) {
            return Err(Failure::usage(format!(
                "--url must be an http:// or https:// URL (got '{url}')"
            )));
        }
        // rustls needs a crypto provider; ring is the one built in.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| Failure::new(USAGE, format!("cannot set up HTTP: {err}")))?;
        Ok(Self {
            http,
            base,
            token: token.filter(|t| !t.is_empty()).map(str::to_owned),
            answered: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Whether `no_answer` means that nothing serves at `--url` (a mistyped
    /// URL, a service not started, a port that does not speak HTTP): no
    /// connection (or no HTTP on it), and no answer ever before. Not worth
    /// waiting for, unlike a service that answers 503.
    pub fn is_not_there(&self, no_answer: &NoAnswer) -> bool {
        no_answer.connect && !self.answered.load(Ordering::Relaxed)
    }

    /// The service's URL, for messages.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Opens a server-sent event stream (`GET path`, no time limit once it
    /// answers): the response, to read chunk by chunk.
    ///
    /// # Errors
    /// No answer within `answer_within`, or no connection.
    pub async fn open_stream(
        &self,
        path: &str,
        answer_within: Duration,
    ) -> Result<reqwest::Response, NoAnswer> {
        let mut request = self
            .http
            .get(format!("{}{path}", self.base))
            .header("accept", "text/event-stream");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        match tokio::time::timeout(answer_within, request.send()).await {
            Ok(Ok(response)) => {
                self.answered.store(true, Ordering::Relaxed);
                Ok(response)
            }
            Ok(Err(err)) => Err(no_answer(&self.base, &err.without_url(), None)),
            Err(_) => Err(NoAnswer {
                why: format!("no answer from {} in time", self.base),
                connect: false,
            }),
        }
    }

    /// One request: `Err` says why there was no answer.
    ///
    /// # Errors
    /// No answer within `timeout`, or no connection.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Answer, NoAnswer> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("accept", "application/json")
            .timeout(timeout.max(Duration::from_millis(1)));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let unreachable =
            |err: reqwest::Error| no_answer(&self.base, &err.without_url(), Some(timeout));
        let response = request.send().await.map_err(unreachable)?;
        self.answered.store(true, Ordering::Relaxed);
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(unreachable)?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Answer { status, body })
    }
}

/// How long one call of [`call`] may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// One call, tried three times while a failure may pass (not when nothing
/// serves at `--url`).
pub async fn call(
    service: &Service,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, Failure> {
    let mut why = String::new();
    for attempt in 1..=3 {
        match service.call(method.clone(), path, body, CALL_TIMEOUT).await {
            Ok(answer) if !answer.may_pass() => return Ok(answer),
            Ok(answer) => why = answer.describe(),
            // Nothing serves at --url: trying again will not change that.
            Err(no_answer) if service.is_not_there(&no_answer) => {
                return Err(unreachable(no_answer));
            }
            Err(no_answer) => why = no_answer.why,
        }
        if attempt < 3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Err(Failure::new(UNAVAILABLE, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_are_taken() {
        assert!(Service::new("http://127.0.0.1:8080/", None).is_ok());
        assert!(Service::new("https://ci.example.com/baton", None).is_ok());
        for bad in ["ftp://x", "127.0.0.1:8080", "http://"] {
            assert_eq!(
                Service::new(bad, None).err().unwrap().status,
                USAGE,
                "{bad}"
            );
        }
    }
}
