//! A turn notice as its receiver gets it: a JSON body, signed as GitHub
//! signs its webhooks (`Baton-Signature: sha256=` the HMAC-SHA256 of the
//! body's bytes with `BATON_WEBHOOK_SECRET`, in lowercase hex).

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The body POSTed to a ticket's `notify` URL when its turn came while
/// nobody waited on it. It carries the ticket: only its receiver sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoticeBody {
    /// Always `granted`.
    pub event: String,
    /// `lock` or `semaphore`.
    pub kind: String,
    pub name: String,
    /// The ticket, to collect its lease with (`POST .../tickets/{ticket}`);
    /// a receiver tells repeats of one notice by it.
    pub ticket: String,
    /// The lease's fencing token.
    pub fencing_token: u64,
    /// Collect it by then (RFC 3339), or it ends `not-collected`.
    pub pickup_by: String,
}

/// `sha256=` and the HMAC-SHA256 of `body` with `secret`, in lowercase hex:
/// the `Baton-Signature` header. A receiver computes the same over the
/// bytes it got and compares in constant time.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + 2 * digest.len());
    out.push_str("sha256=");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GitHub's documented example: secret "It's a Secret to Everybody",
    /// payload "Hello, World!".
    #[test]
    fn signs_as_github_does() {
        assert_eq!(
            signature(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }
}
