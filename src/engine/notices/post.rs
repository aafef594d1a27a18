//! One delivery of a turn notice over HTTP: short timeouts, no redirects (a
//! redirect could lead past `BATON_WEBHOOK_HOSTS`), and on failure a short
//! sentence for the ticket's `notify_error`, which never holds the URL.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, USER_AGENT};

/// How long a receiver has to accept the connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a receiver has to answer the whole request.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The client every delivery of this instance shares.
///
/// # Errors
/// When no client can be made (no TLS provider).
pub(super) fn client() -> Result<reqwest::Client, reqwest::Error> {
    // The process's TLS provider (the service installs the same at start).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(ANSWER_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// POSTs `body` signed with `signature` to `url`: `Ok` for a 2xx answer,
/// else why not.
pub(super) async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    signature: &str,
) -> Result<(), String> {
    let sent = client
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header(USER_AGENT, concat!("baton/", env!("CARGO_PKG_VERSION")))
        .header("Baton-Event", "granted")
        .header("Baton-Signature", signature)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(answer) if answer.status().is_success() => Ok(()),
        Ok(answer) => Err(format!("receiver answered {}", answer.status().as_u16())),
        Err(err) if err.is_timeout() => Err(format!(
            "receiver did not answer within {} s",
            ANSWER_TIMEOUT.as_secs()
        )),
        Err(err) if err.is_connect() => Err("receiver could not be reached".to_owned()),
        Err(_) => Err("delivery failed on the way".to_owned()),
    }
}
