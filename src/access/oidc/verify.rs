//! The checks of a job's token, in order: its form and algorithm (RS256 or
//! ES256 only), its issuer, its signature against the issuer's keys, its
//! audience, `exp` and `nbf` (with [`LEEWAY`]). A failure names the check
//! ([`Check`]) and never quotes the token nor any of its claims.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::jwks::KeySet;

/// The clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY: u64 = 60;

/// A check a token failed: named in the 401's detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Not three base64url parts of JSON.
    Format,
    Algorithm,
    Issuer,
    Signature,
    Audience,
    Expired,
    NotYetValid,
}

impl Check {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Format => "format",
            Self::Algorithm => "algorithm",
            Self::Issuer => "issuer",
            Self::Signature => "signature",
            Self::Audience => "audience",
            Self::Expired => "expired",
            Self::NotYetValid => "not-yet-valid",
        }
    }
}

/// Why a job's token gives no caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityRefusal {
    /// 401: it failed `check`, for the reason `why`.
    Failed { check: Check, why: &'static str },
    /// 403: valid, but no rule of its issuer matches its claims.
    NoRule,
    /// 503: its issuer's keys cannot be fetched now.
    KeysUnavailable { retry_after: u64 },
}

impl IdentityRefusal {
    pub(super) fn failed(check: Check, why: &'static str) -> Self {
        Self::Failed { check, why }
    }
}

impl std::error::Error for IdentityRefusal {}

impl fmt::Display for IdentityRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed { check, why } => write!(
                f,
                "the identity token failed the {} check: {why}",
                check.as_str()
            ),
            Self::NoRule => f.write_str(
                "the identity token is valid, but no [[issuer.rule]] of its issuer matches its claims",
            ),
            Self::KeysUnavailable { .. } => f.write_str(
                "the keys of the identity token's issuer cannot be fetched right now; retry later",
            ),
        }
    }
}

/// Whether a bearer token has the form of a JWT: three base64url parts
/// (the last, the signature, may be empty: `alg: none` is then refused by name).
pub fn looks_like_jwt(token: &[u8]) -> bool {
    let mut parts = 0;
    for part in token.split(|b| *b == b'.') {
        parts += 1;
        if parts > 3
            || (part.is_empty() && parts < 3)
            || !part
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return false;
        }
    }
    parts == 3
}

/// A job's token, read but not yet trusted. Never shown.
pub struct Presented {
    /// `header.payload`, as signed.
    message: String,
    signature: String,
    pub alg: Algorithm,
    pub kid: Option<String>,
    /// Its `iss`, which says whose keys to check it with.
    pub iss: String,
    claims: Map<String, Value>,
}

impl fmt::Debug for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Presented(…)")
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    kid: Option<String>,
}

impl Presented {
    /// Reads the header and the claims of `token` (a [`looks_like_jwt`]).
    ///
    /// # Errors
    /// The `format` or `algorithm` check, or no `iss` (`issuer`).
    pub fn read(token: &str) -> Result<Self, IdentityRefusal> {
        let malformed = || {
            IdentityRefusal::failed(
                Check::Format,
                "not a JSON Web Token (three base64url parts: a header and claims in JSON, a signature)",
            )
        };
        let (message, signature) = token.rsplit_once('.').ok_or_else(malformed)?;
        let (header, payload) = message.split_once('.').ok_or_else(malformed)?;
        let header: Header = URL_SAFE_NO_PAD
            .decode(header)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or_else(malformed)?;
        let alg = match header.alg.as_str() {
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            "none" | "None" | "NONE" => {
                return Err(IdentityRefusal::failed(
                    Check::Algorithm,
                    "alg none is refused: a job's token must be signed",
                ))
            }
            alg if alg.starts_with("HS") => return Err(IdentityRefusal::failed(
                Check::Algorithm,
                "HMAC algorithms are refused: an issuer signs with a private key (RS256 or ES256)",
            )),
            _ => {
                return Err(IdentityRefusal::failed(
                    Check::Algorithm,
                    "only RS256 and ES256 are accepted",
                ))
            }
        };
        let claims: Map<String, Value> = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or_else(malformed)?;
        let Some(Value::String(iss)) = claims.get("iss") else {
            return Err(IdentityRefusal::failed(
                Check::Issuer,
                "it has no iss (a string)",
            ));
        };
        Ok(Self {
            iss: iss.clone(),
            message: message.to_owned(),
            signature: signature.to_owned(),
            alg,
            kid: header.kid,
            claims,
        })
    }

    /// Its claims, once [`Self::verify`] has accepted them.
    pub fn claims(&self) -> &Map<String, Value> {
        &self.claims
    }

    /// Checks its signature with `keys`, then its audience and times.
    ///
    /// # Errors
    /// The first check it fails.
    pub fn verify(&self, keys: &KeySet, audience: &str) -> Result<(), IdentityRefusal> {
        let signed = keys.candidates(self.kid.as_deref(), self.alg).any(|key| {
            jsonwebtoken::crypto::verify(
                &self.signature,
                self.message.as_bytes(),
                &key.key,
                self.alg,
            )
            .unwrap_or(false)
        });
        if !signed {
            return Err(IdentityRefusal::failed(
                Check::Signature,
                "it is not signed by a key of its issuer",
            ));
        }
        let audience_ok = match self.claims.get("aud") {
            Some(Value::String(aud)) => aud == audience,
            Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
            _ => false,
        };
        if !audience_ok {
            return Err(IdentityRefusal::failed(
                Check::Audience,
                "its aud is not the audience configured for its issuer",
            ));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        match self.claims.get("exp").and_then(Value::as_u64) {
            None => {
                return Err(IdentityRefusal::failed(
                    Check::Expired,
                    "it has no exp (a number of seconds)",
                ))
            }
            Some(exp) if exp.saturating_add(LEEWAY) < now => {
                return Err(IdentityRefusal::failed(
                    Check::Expired,
                    "its exp is past (60 s of leeway allowed)",
                ))
            }
            Some(_) => {}
        }
        match self.claims.get("nbf") {
            None => Ok(()),
            Some(nbf) => match nbf.as_u64() {
                Some(nbf) if nbf <= now.saturating_add(LEEWAY) => Ok(()),
                Some(_) => Err(IdentityRefusal::failed(
                    Check::NotYetValid,
                    "its nbf is still to come (60 s of leeway allowed)",
                )),
                None => Err(IdentityRefusal::failed(
                    Check::NotYetValid,
                    "its nbf is not a number of seconds",
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn only_three_base64url_parts_look_like_a_jwt() {
        assert!(looks_like_jwt(b"eyJh.eyJi.c2ln"));
        assert!(looks_like_jwt(b"a-_.b.c"));
        assert!(looks_like_jwt(b"a.b."));
        for not in [
            &b"plain-token"[..],
            b"a.b",
            b"a.b.c.d",
            b"a..c",
            b"a.b.c=",
            b"a.b c.d",
        ] {
            assert!(!looks_like_jwt(not));
        }
    }

    #[test]
    fn alg_none_and_hmac_are_refused_before_anything_else() {
        let claims = part(r#"{"iss":"https://ci.example","aud":"baton","exp":99999999999}"#);
        for (alg, says) in [
            ("none", "alg none"),
            ("HS256", "HMAC"),
            ("RS512", "only RS256"),
        ] {
            let token = format!("{}.{claims}.c2ln", part(&format!(r#"{{"alg":"{alg}"}}"#)));
            let err = Presented::read(&token).unwrap_err();
            assert!(matches!(
                err,
                IdentityRefusal::Failed {
                    check: Check::Algorithm,
                    ..
                }
            ));
            assert!(err.to_string().contains(says), "{err}");
        }
        let token = format!("{}.{}.c2ln", part(r#"{"alg":"RS256"}"#), part("[1]"));
        let err = Presented::read(&token).unwrap_err();
        assert!(matches!(
            err,
            IdentityRefusal::Failed {
                check: Check::Format,
                ..
            }
        ));
        let token = format!("{}.{}.c2ln", part(r#"{"alg":"ES256","kid":"k"}"#), claims);
        let presented = Presented::read(&token).unwrap();
        assert_eq!(
            (presented.alg, presented.kid.as_deref()),
            (Algorithm::ES256, Some("k"))
        );
        assert_eq!(presented.iss, "https://ci.example");
        assert_eq!(format!("{presented:?}"), "Presented(…)");
    }
}
