//! An issuer's signing keys: a JSON Web Key Set fetched (or read from a
//! file) and cached; fetched again when a token names a key id the cache
//! does not hold, at most once every [`REFETCH_INTERVAL`].
//!
//! Requests read the cache without a lock ([`ArcSwap`]); a fetch holds only
//! its issuer's own lock, which nothing but another fetch of the same
//! issuer waits for, and ends within [`FETCH_TIMEOUT`]. Requests with
//! ordinary tokens never come near either.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

use super::config::JwksSource;

/// The shortest time between two fetches of one issuer's keys.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// The longest a fetch may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set read.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// One usable key: RS256 (RSA) or ES256 (P-256).
#[derive(Clone)]
pub struct Key {
    pub kid: Option<String>,
    pub alg: Algorithm,
    pub key: DecodingKey,
}

/// The keys of one fetch.
#[derive(Clone, Default)]
pub struct KeySet(Vec<Key>);

impl KeySet {
    /// Reads a JWKS document, keeping the keys that can sign RS256 or ES256
    /// (others, and encryption keys, are skipped).
    ///
    /// # Errors
    /// Not a JWKS document (the error of the JSON parser, which quotes nothing).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let set: JwkSet = serde_json::from_slice(bytes)
            .map_err(|err| format!("not a JSON Web Key Set ({err})"))?;
        let keys = set
            .keys
            .iter()
            .filter(|jwk| jwk.common.public_key_use != Some(PublicKeyUse::Encryption))
            .filter_map(|jwk| {
                let alg = match &jwk.algorithm {
                    AlgorithmParameters::RSA(_) => Algorithm::RS256,
                    AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                        Algorithm::ES256
                    }
                    _ => return None,
                };
                let declared = jwk.common.key_algorithm;
                let fits = match declared {
                    None => true,
                    Some(KeyAlgorithm::RS256) => alg == Algorithm::RS256,
                    Some(KeyAlgorithm::ES256) => alg == Algorithm::ES256,
                    Some(_) => false,
                };
                let key = DecodingKey::from_jwk(jwk).ok()?;
                fits.then(|| Key {
                    kid: jwk.common.key_id.clone(),
                    alg,
                    key,
                })
            })
            .collect();
        Ok(Self(keys))
    }

    /// How many usable keys it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys a token signed with `alg` under key id `kid` may be
    /// checked against: the key of that id (and that algorithm), or, for a
    /// token without a key id, every key of that algorithm.
    pub fn candidates<'a>(
        &'a self,
        kid: Option<&'a str>,
        alg: Algorithm,
    ) -> impl Iterator<Item = &'a Key> + 'a {
        self.0
            .iter()
            .filter(move |key| key.alg == alg && (kid.is_none() || key.kid.as_deref() == kid))
    }

    /// Whether it holds a key of id `kid` (any key, without one).
    pub fn knows(&self, kid: Option<&str>, alg: Algorithm) -> bool {
        self.candidates(kid, alg).next().is_some()
    }
}

/// The last fetch of an issuer's keys.
#[derive(Default)]
struct LastFetch {
    at: Option<Instant>,
    /// Why it failed, if it did.
    failed: Option<String>,
}

/// An issuer's cached keys and where they come from.
pub struct KeyCache {
    pub source: JwksSource,
    keys: ArcSwap<KeySet>,
    /// Taken by fetches only.
    last: tokio::sync::Mutex<LastFetch>,
}

/// Why a token's key is not to be had now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoKey {
    /// The keys were fetched (recently): none has this id.
    Unknown,
    /// The last fetch failed; the next may be tried after this many seconds.
    Unavailable { retry_after: u64 },
}

impl KeyCache {
    /// A cache for `source`, holding `keys` (read at load for a file).
    pub fn new(source: JwksSource, keys: KeySet, fetched: bool) -> Self {
        let last = LastFetch {
            at: fetched.then(Instant::now),
            failed: None,
        };
        Self {
            source,
            keys: ArcSwap::from_pointee(keys),
            last: tokio::sync::Mutex::new(last),
        }
    }

    /// The keys in the cache now, without waiting.
    pub fn keys(&self) -> Arc<KeySet> {
        self.keys.load_full()
    }

    /// The keys once they hold `kid`: fetched again unless another fetch
    /// already brought it, or the last fetch was less than
    /// [`REFETCH_INTERVAL`] ago.
    ///
    /// # Errors
    /// [`NoKey`]: none has this id, or the keys cannot be fetched.
    pub async fn keys_with(&self, kid: Option<&str>, alg: Algorithm) -> Result<Arc<KeySet>, NoKey> {
        let mut last = self.last.lock().await;
        let keys = self.keys();
        if keys.knows(kid, alg) {
            return Ok(keys);
        }
        if let Some(at) = last.at {
            let since = at.elapsed();
            if since < REFETCH_INTERVAL {
                return match &last.failed {
                    None => Err(NoKey::Unknown),
                    Some(_) => Err(NoKey::Unavailable {
                        retry_after: (REFETCH_INTERVAL - since).as_secs().max(1),
                    }),
                };
            }
        }
        let fetched = fetch(&self.source).await;
        last.at = Some(Instant::now());
        match fetched {
            Ok(keys) => {
                last.failed = None;
                let keys = Arc::new(keys);
                self.keys.store(keys.clone());
                if keys.knows(kid, alg) {
                    Ok(keys)
                } else {
                    Err(NoKey::Unknown)
                }
            }
            Err(err) => {
                tracing::warn!(jwks = %self.source, %err, "the keys of an issuer cannot be fetched");
                last.failed = Some(err);
                Err(NoKey::Unavailable {
                    retry_after: REFETCH_INTERVAL.as_secs(),
                })
            }
        }
    }
}

/// Reads a key file at load (sync: loads are).
///
/// # Errors
/// Unreadable, not a key set, or without a usable key.
pub fn read_file(path: &std::path::Path) -> Result<KeySet, String> {
    let bytes = std::fs::read(path)
        .map_err(|err| format!("jwks {}: cannot be read ({err})", path.display()))?;
    let keys = KeySet::parse(&bytes).map_err(|err| format!("jwks {}: {err}", path.display()))?;
    if keys.is_empty() {
        return Err(format!(
            "jwks {}: holds no RS256 or ES256 signing key",
            path.display()
        ));
    }
    Ok(keys)
}

async fn fetch(source: &JwksSource) -> Result<KeySet, String> {
    match source {
        JwksSource::File(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|err| format!("cannot be read ({err})"))?;
            KeySet::parse(&bytes)
        }
        JwksSource::Url(url) => {
            let fetch = async {
                let mut response = client()?
                    .get(url.clone())
                    .send()
                    .await
                    .map_err(|err| format!("cannot be fetched ({err})"))?;
                if !response.status().is_success() {
                    return Err(format!("answered {}", response.status()));
                }
                let mut body = Vec::new();
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .map_err(|err| format!("cannot be read ({err})"))?
                {
                    if body.len() + chunk.len() > MAX_JWKS_BYTES {
                        return Err(format!("is over {MAX_JWKS_BYTES} bytes"));
                    }
                    body.extend_from_slice(&chunk);
                }
                KeySet::parse(&body)
            };
            // The client's own timeout covers the exchange; this, anything else.
            tokio::time::timeout(FETCH_TIMEOUT, fetch)
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {FETCH_TIMEOUT:?}")))
        }
    }
}

fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // The process's TLS provider (the service installs the same at start).
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                .connect_timeout(FETCH_TIMEOUT)
                .build()
                .map_err(|err| format!("no HTTP client ({err})"))
        })
        .as_ref()
        .map_err(Clone::clone)
}
