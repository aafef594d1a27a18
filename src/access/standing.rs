//! What a request that stays open (a stream, a wait in line) knows of its
//! token: a reload, or a token's `expires` passing, reaches it at once, and
//! it looks its token up again ([`Standing::changed`]) to stop delivering
//! what the token may no longer see, or to leave the line.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use super::digest::TokenDigest;
use super::principal::Principal;
use super::tokens::{Tokens, Unidentified};

/// A request's token as the set in force holds it, watched for changes.
#[derive(Clone)]
pub struct Standing {
    tokens: Arc<Tokens>,
    /// Never shown: `Debug` hides it.
    digest: TokenDigest,
    /// The set's generation as of the request's lookup.
    seen: watch::Receiver<u64>,
}

impl fmt::Debug for Standing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Standing").finish_non_exhaustive()
    }
}

impl Standing {
    pub(super) fn new(
        tokens: Arc<Tokens>,
        digest: TokenDigest,
        seen: watch::Receiver<u64>,
    ) -> Self {
        Self {
            tokens,
            digest,
            seen,
        }
    }

    /// The token's digest: whose slots its requests take.
    pub fn digest(&self) -> TokenDigest {
        self.digest
    }

    /// Waits until the set in force changes (at once when it changed since
    /// the request looked its token up), then what the token may do now:
    /// `None` once it is removed or past its `expires`. Never resolves on a
    /// service that stops watching.
    pub async fn changed(&mut self) -> Option<Arc<Principal>> {
        if self.seen.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
        self.tokens.lookup_digest(&self.digest)
    }
}

/// [`Tokens::identify`], and, for a token of the set in force (not a job's
/// token, nor anyone on an open service), its [`Standing`]: how what the
/// request opens looks the token up again when the set changes.
///
/// # Errors
/// [`Unidentified`]: why there is no caller (yet).
pub fn identify_standing(
    tokens: &Arc<Tokens>,
    token: Option<&[u8]>,
) -> Result<(Arc<Principal>, Option<Standing>), Unidentified> {
    let (principal, found) = tokens.find(token)?;
    let standing = found.map(|(digest, seen)| Standing::new(tokens.clone(), digest, seen));
    Ok((principal, standing))
}
