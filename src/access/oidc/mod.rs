//! CI job identity: the OpenID Connect tokens GitHub Actions, GitLab and
//! others give each job, taken as bearer tokens when `BATON_TOKENS_FILE`
//! has `[[issuer]]` entries.
//!
//! A bearer token that is no configured token and has the form of a JWT is
//! read ([`verify::Presented`]); its `iss` picks the issuer; its signature
//! is checked against the issuer's cached keys ([`jwks`]), then its
//! audience, `exp` and `nbf`; the first of the issuer's rules ([`rules`])
//! that matches its claims makes it a [`Principal`] like a scoped token's,
//! named from its claims. When the cache lacks the token's key, the request
//! waits for a fetch ([`Identity::Pending`]) outside anything requests with
//! ordinary tokens touch.
//!
//! - [`config`]: the `[[issuer]]` entries of the file.
//! - [`verify`]: the checks, and the refusal naming the one failed.

pub mod config;
pub mod jwks;
pub mod rules;
pub mod verify;

use std::collections::HashMap;
use std::sync::Arc;

use self::config::{IssuerConfig, JwksSource};
use self::jwks::{KeyCache, KeySet, NoKey};
use self::rules::Rule;
pub use self::verify::{looks_like_jwt, IdentityRefusal};
use self::verify::{Check, Presented};
use super::principal::Principal;

/// The issuers in force between two reloads, by `iss`.
#[derive(Default)]
pub struct Issuers {
    by_url: HashMap<String, Arc<Issuer>>,
}

/// One issuer: what its tokens must say, its rules, and its keys.
pub struct Issuer {
    audience: String,
    rules: Vec<Rule>,
    keys: Arc<KeyCache>,
}

/// Who a job's token makes the caller, or why none.
pub enum Identity {
    Known(Arc<Principal>),
    Refused(IdentityRefusal),
    /// Its key is not in the cache: answered once it is fetched.
    Pending(PendingIdentity),
}

/// A job's token that waits for its issuer's keys.
pub struct PendingIdentity {
    issuer: Arc<Issuer>,
    presented: Presented,
}

impl std::fmt::Debug for Issuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_url.keys()).finish()
    }
}

impl Issuers {
    /// The issuers of a token file. The keys of a file are read now (a file
    /// that cannot be is refused); those of a URL are fetched on first use,
    /// or kept from `previous` (the set before a reload) when its issuer
    /// reads them from the same URL.
    ///
    /// # Errors
    /// A key file that cannot be read, naming its issuer.
    pub fn new(configs: Vec<IssuerConfig>, previous: Option<&Self>) -> Result<Self, String> {
        let mut by_url = HashMap::with_capacity(configs.len());
        for config in configs {
            let kept = previous
                .and_then(|previous| previous.by_url.get(&config.url))
                .filter(|old| {
                    matches!(old.keys.source, JwksSource::Url(_)) && old.keys.source == config.jwks
                })
                .map(|old| old.keys.clone());
            let keys = match (kept, &config.jwks) {
                (Some(keys), _) => keys,
                (None, JwksSource::File(path)) => {
                    let keys = jwks::read_file(path)
                        .map_err(|err| format!("[[issuer]] {:?}: {err}", config.url))?;
                    Arc::new(KeyCache::new(config.jwks.clone(), keys, true))
                }
                (None, JwksSource::Url(_)) => {
                    Arc::new(KeyCache::new(config.jwks.clone(), KeySet::default(), false))
                }
            };
            let issuer = Issuer {
                audience: config.audience,
                rules: config.rules,
                keys,
            };
            by_url.insert(config.url, Arc::new(issuer));
        }
        Ok(Self { by_url })
    }

    /// How many issuers there are.
    pub fn len(&self) -> usize {
        self.by_url.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_url.is_empty()
    }

    /// Who `token` (a [`looks_like_jwt`]) makes the caller: at once when
    /// its issuer's key is cached (or it fails a check before that).
    pub fn identify(&self, token: &[u8]) -> Identity {
        let Ok(token) = std::str::from_utf8(token) else {
            return Identity::Refused(IdentityRefusal::failed(Check::Format, "not ASCII"));
        };
        let presented = match Presented::read(token) {
            Ok(presented) => presented,
            Err(refusal) => return Identity::Refused(refusal),
        };
        let Some(issuer) = self.by_url.get(&presented.iss) else {
            return Identity::Refused(IdentityRefusal::failed(
                Check::Issuer,
                "its iss is not the url of an [[issuer]] of this service",
            ));
        };
        let keys = issuer.keys.keys();
        if keys.knows(presented.kid.as_deref(), presented.alg) {
            return match issuer.caller(&presented, &keys) {
                Ok(principal) => Identity::Known(principal),
                Err(refusal) => Identity::Refused(refusal),
            };
        }
        Identity::Pending(PendingIdentity {
            issuer: issuer.clone(),
            presented,
        })
    }
}

impl Issuer {
    fn caller(
        &self,
        presented: &Presented,
        keys: &KeySet,
    ) -> Result<Arc<Principal>, IdentityRefusal> {
        presented.verify(keys, &self.audience)?;
        self.rules
            .iter()
            .find_map(|rule| rule.apply(presented.claims()))
            .ok_or(IdentityRefusal::NoRule)
    }
}

impl PendingIdentity {
    /// Waits for the issuer's keys (fetched now unless they were less than
    /// 30 s ago), then checks the token.
    ///
    /// # Errors
    /// A check failed (401), no rule matches (403), or the keys cannot be
    /// fetched (503).
    pub async fn resolve(self) -> Result<Arc<Principal>, IdentityRefusal> {
        let Self { issuer, presented } = self;
        let keys = issuer
            .keys
            .keys_with(presented.kid.as_deref(), presented.alg)
            .await
            .map_err(|no_key| match no_key {
                NoKey::Unknown => IdentityRefusal::failed(
                    Check::Signature,
                    "its kid is not the id of a key of its issuer",
                ),
                NoKey::Unavailable { retry_after } => {
                    IdentityRefusal::KeysUnavailable { retry_after }
                }
            })?;
        issuer.caller(&presented, &keys)
    }
}
