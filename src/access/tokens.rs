//! The tokens in force: read at start from the settings and the token
//! file, and read again on SIGHUP or when the file changes, swapped whole,
//! never half.

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::digest::TokenDigest;
use super::keyring::Keyring;
use super::oidc::{looks_like_jwt, Identity, IdentityRefusal, Issuers, PendingIdentity};
use super::principal::Principal;
use super::tokens_file;
use crate::config::{ConfigError, Settings};

/// The setting a token file comes from, as errors name it.
const TOKENS_FILE: &str = "BATON_TOKENS_FILE (--tokens-file)";

/// The tokens the service accepts now, and where they come from.
pub struct Tokens {
    /// Swapped whole by [`Self::reload`]: a request sees the old set or the
    /// new one, never a mix.
    current: ArcSwap<Keyring>,
    /// `BATON_API_TOKENS` and its file, read at start.
    api: Vec<String>,
    /// `BATON_ADMIN_TOKENS` and its file, read at start.
    admin: Vec<String>,
    /// `BATON_TOKENS_FILE`, read at start and on every reload.
    file: Option<PathBuf>,
    /// Whether a token is needed at all: with any token configured (a
    /// token file counts even while it is being replaced).
    required: bool,
    /// Who everyone is on a service without tokens.
    anyone: Arc<Principal>,
    /// Bumped each time the set in force changes (a reload, or a token's
    /// `expires` passing): what a request opened before watches, to look
    /// its token up again (`standing.rs`).
    generation: Arc<watch::Sender<u64>>,
    /// How many entries gave their token in plain text (`value`), at the
    /// last read of the file.
    has_values: std::sync::atomic::AtomicBool,
}

/// Why a request is not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoValidToken;

/// Why a request has no caller yet ([`Tokens::identify`]).
pub enum Unidentified {
    /// No token, or one that is neither configured nor a job's token: 401.
    NoValidToken,
    /// A job's token refused (401 naming the check, 403, or 503).
    Refused(IdentityRefusal),
    /// A job's token whose issuer's key must be fetched first.
    Pending(Box<PendingIdentity>),
}

impl Tokens {
    /// Reads the tokens of `settings`, the token file included.
    ///
    /// # Errors
    /// A token file that cannot be read or is not valid: one line naming
    /// the entry at fault, never a token.
    pub fn load(settings: &Settings) -> Result<Self, ConfigError> {
        let file = settings.tokens_file.clone();
        let (keyring, has_values) = build(
            &settings.api_tokens,
            &settings.admin_tokens,
            file.as_ref(),
            None,
        )?;
        Ok(Self {
            generation: Arc::new(watch::Sender::new(0)),
            has_values: has_values.into(),
            current: ArcSwap::from_pointee(keyring),
            api: settings.api_tokens.clone(),
            admin: settings.admin_tokens.clone(),
            required: file.is_some()
                || !settings.api_tokens.is_empty()
                || !settings.admin_tokens.is_empty(),
            file,
            anyone: Arc::new(Principal::anyone()),
        })
    }

    /// No tokens at all: everything is open, force-release included.
    pub fn is_open(&self) -> bool {
        !self.required
    }

    /// What anyone who can reach the service may do without a token, beyond
    /// the service endpoints (`/healthz`, `/readyz`, `/metrics`,
    /// `/openapi.json`, `/docs`, `/problems`), which are always open; `None`
    /// when that is nothing.
    pub fn what_is_open(&self) -> Option<&'static str> {
        self.is_open().then_some(
            "BATON_API_TOKENS, BATON_ADMIN_TOKENS and BATON_TOKENS_FILE are all unset: anyone \
             who can reach this service can acquire, refresh, release and force-release every \
             lock and semaphore",
        )
    }

    /// The token file, if one is configured: read again on SIGHUP and
    /// when it changes.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// Who a request that presents `token` (the bearer token, if any) is.
    ///
    /// # Errors
    /// [`NoValidToken`] when the service needs a token and none valid was given.
    pub fn principal(&self, token: Option<&[u8]>) -> Result<Arc<Principal>, NoValidToken> {
        self.identify(token).map_err(|_| NoValidToken)
    }

    /// Who a request that presents `token` is: a configured token (one
    /// hash and one probe, as ever), else, when the file has issuers and
    /// the token has the form of a JWT, a job's token, checked against the
    /// issuer's cached keys ([`Unidentified::Pending`] when they must be
    /// fetched first).
    ///
    /// # Errors
    /// [`Unidentified`]: why there is no caller (yet).
    pub fn identify(&self, token: Option<&[u8]>) -> Result<Arc<Principal>, Unidentified> {
        self.find(token).map(|(principal, _)| principal)
    }

    /// The caller, and for a token of the set in force, its digest and the
    /// set's generation it was looked up in.
    #[allow(clippy::type_complexity)]
    pub(super) fn find(
        &self,
        token: Option<&[u8]>,
    ) -> Result<(Arc<Principal>, Option<(TokenDigest, watch::Receiver<u64>)>), Unidentified> {
        if !self.required {
            return Ok((self.anyone.clone(), None));
        }
        let Some(token) = token.filter(|token| !token.is_empty()) else {
            return Err(Unidentified::NoValidToken);
        };
        // Watched before the lookup: a change just after it is not missed.
        let seen = self.generation.subscribe();
        let keyring = self.current.load();
        let digest = TokenDigest::of(token);
        if let Some(principal) = keyring.lookup_digest(&digest) {
            return Ok((principal, Some((digest, seen))));
        }
        if keyring.issuers().is_empty() || !looks_like_jwt(token) {
            return Err(Unidentified::NoValidToken);
        }
        match keyring.issuers().identify(token) {
            Identity::Known(principal) => Ok((principal, None)),
            Identity::Refused(refusal) => Err(Unidentified::Refused(refusal)),
            Identity::Pending(pending) => Err(Unidentified::Pending(Box::new(pending))),
        }
    }

    /// Reads the token file again and puts the new set in force at once;
    /// on any error the set in force stays as it was. Returns how many
    /// tokens are now in force.
    ///
    /// # Errors
    /// The file cannot be read or is not valid (one line, as at start).
    pub fn reload(&self) -> Result<usize, ConfigError> {
        let previous = self.current.load();
        let built = build(
            &self.api,
            &self.admin,
            self.file.as_ref(),
            Some(previous.issuers()),
        );
        let (keyring, has_values) = built?;
        let count = keyring.len();
        self.current.store(Arc::new(keyring));
        self.has_values
            .store(has_values, std::sync::atomic::Ordering::Relaxed);
        self.changed();
        Ok(count)
    }

    /// Tells what requests opened that the set in force changed: each
    /// looks its token up again.
    pub(super) fn changed(&self) {
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// Who presents the token of `digest` now, if anyone.
    pub(super) fn lookup_digest(&self, digest: &TokenDigest) -> Option<Arc<Principal>> {
        self.current.load().lookup_digest(digest)
    }

    /// The earliest `expires` of the set in force still to come.
    pub(super) fn next_expiry(&self) -> Option<std::time::SystemTime> {
        self.current.load().next_expiry()
    }

    /// How many tokens are in force, for the metrics at start.
    pub fn count(&self) -> usize {
        self.current.load().len()
    }

    /// The warning a token file deserves now, if any: one that gives tokens
    /// in plain text (`value`) and that group or others may read.
    pub fn file_warning(&self) -> Option<String> {
        let path = self.file.as_ref()?;
        if !self.has_values.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        readable_by_others(path).then(|| {
            format!(
                "the token file {} gives tokens in plain text (value = ...) and group or others \
                 may read it: chmod 600 it, or give sha256 = ... instead",
                path.display()
            )
        })
    }
}

/// Whether group or others may read the file at `path` (never on a system
/// without Unix permissions).
fn readable_by_others(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o044 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// The set of `api`, `admin` and `file`, and whether the file gives tokens
/// in plain text; the issuers' cached keys are kept from `previous` where
/// their issuer reads them from the same URL.
fn build(
    api: &[String],
    admin: &[String],
    file: Option<&PathBuf>,
    previous: Option<&Issuers>,
) -> Result<(Keyring, bool), ConfigError> {
    let Some(path) = file else {
        return Ok((Keyring::new(api, admin, Vec::new()), false));
    };
    let refused = |expected| ConfigError {
        setting: TOKENS_FILE.to_owned(),
        value: Some(path.display().to_string()),
        expected,
    };
    let from_file = tokens_file::read(path).map_err(refused)?;
    given_once(api, admin, &from_file.tokens).map_err(refused)?;
    let issuers = Issuers::new(from_file.issuers, previous).map_err(refused)?;
    let has_values = from_file.has_values;
    Ok((
        Keyring::new(api, admin, from_file.tokens).with_issuers(issuers),
        has_values,
    ))
}

/// One token, one place: a file entry never widens nor narrows a token of
/// `BATON_API_TOKENS` or `BATON_ADMIN_TOKENS` silently.
///
/// # Errors
/// The first entry whose token a variable gives too, by its name.
fn given_once(
    api: &[String],
    admin: &[String],
    file: &[tokens_file::FileToken],
) -> Result<(), String> {
    let variables: Vec<(TokenDigest, &str)> = api
        .iter()
        .map(|token| (TokenDigest::of(token.as_bytes()), "BATON_API_TOKENS"))
        .chain(
            admin
                .iter()
                .map(|token| (TokenDigest::of(token.as_bytes()), "BATON_ADMIN_TOKENS")),
        )
        .collect();
    for entry in file {
        if let Some((_, variable)) = variables
            .iter()
            .find(|(digest, _)| digest.same_as(&entry.digest))
        {
            return Err(format!(
                "[[token]] {:?}: the same token is given by {variable}; give each token in one \
                 place only",
                entry.name.as_str()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Name, Scope};

    fn settings(api: &[&str], admin: &[&str], file: Option<PathBuf>) -> Settings {
        let mut settings = Settings::from_lookup(|_| None).unwrap();
        settings.api_tokens = api.iter().map(|t| (*t).to_owned()).collect();
        settings.admin_tokens = admin.iter().map(|t| (*t).to_owned()).collect();
        settings.tokens_file = file;
        settings
    }

    fn temp_file(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("baton-tokens-{tag}-{}.toml", std::process::id()))
    }

    #[test]
    fn an_open_service_lets_everyone_in_as_anyone() {
        let tokens = Tokens::load(&settings(&[], &[], None)).unwrap();
        assert!(tokens.is_open() && tokens.what_is_open().is_some());
        let anyone = tokens.principal(None).unwrap();
        assert!(anyone.allows(Scope::Admin, &Name::parse("x").unwrap()));
        assert_eq!(anyone.name(), None);
        assert!(tokens.principal(Some(b"whatever")).is_ok());
    }

    #[test]
    fn any_token_turns_authentication_on() {
        for (api, admin) in [(&["a"][..], &[][..]), (&[], &["root"])] {
            let tokens = Tokens::load(&settings(api, admin, None)).unwrap();
            assert_eq!(tokens.what_is_open(), None);
            assert_eq!(tokens.principal(None), Err(NoValidToken));
            assert_eq!(tokens.principal(Some(b"")), Err(NoValidToken));
            assert_eq!(tokens.principal(Some(b"other")), Err(NoValidToken));
        }
    }

    #[test]
    fn a_token_in_the_file_and_in_a_variable_is_refused_naming_the_entry() {
        let path = temp_file("twice");
        std::fs::write(
            &path,
            "[[token]]\nname = \"team\"\nvalue = \"given-twice-0123456789\"\nallow = [\"read:*\"]\n",
        )
        .unwrap();
        for (api, admin, variable) in [
            (&["given-twice-0123456789"][..], &[][..], "BATON_API_TOKENS"),
            (&[], &["given-twice-0123456789"], "BATON_ADMIN_TOKENS"),
        ] {
            let err = Tokens::load(&settings(api, admin, Some(path.clone())))
                .err()
                .expect("refused")
                .to_string();
            assert!(
                err.contains("[[token]] \"team\": the same token is given by")
                    && err.contains(variable)
                    && !err.contains("given-twice"),
                "{err}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_file_of_plain_values_that_others_may_read_is_warned_of() {
        use std::os::unix::fs::PermissionsExt;
        let path = temp_file("mode");
        let write = |body: &str, mode: u32| {
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let value =
            "[[token]]\nname = \"a\"\nvalue = \"plain-value-0123456789\"\nallow = [\"read:*\"]\n";
        write(value, 0o644);
        let tokens = Tokens::load(&settings(&[], &[], Some(path.clone()))).unwrap();
        let warning = tokens.file_warning().expect("a warning");
        assert!(warning.contains(&path.display().to_string()), "{warning}");
        write(value, 0o600);
        assert_eq!(
            Tokens::load(&settings(&[], &[], Some(path.clone())))
                .unwrap()
                .file_warning(),
            None
        );
        let digest = format!(
            "[[token]]\nname = \"a\"\nsha256 = \"{}\"\nallow = [\"read:*\"]\n",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        write(&digest, 0o644);
        assert_eq!(
            Tokens::load(&settings(&[], &[], Some(path.clone())))
                .unwrap()
                .file_warning(),
            None
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_reload_swaps_the_whole_set_and_a_bad_file_keeps_the_old_one() {
        let path = temp_file("reload");
        let write = |token: &str, allow: &str| {
            std::fs::write(
                &path,
                format!("[[token]]\nname = \"team\"\nvalue = \"{token}\"\nallow = [\"{allow}\"]\n"),
            )
            .unwrap();
        };
        write("first-token-0123456789", "read:*");
        let tokens = Tokens::load(&settings(&["api"], &[], Some(path.clone()))).unwrap();
        assert!(tokens.principal(Some(b"first-token-0123456789")).is_ok());
        assert!(tokens.principal(Some(b"api")).is_ok());

        write("second-token-0123456789", "write:*");
        assert_eq!(tokens.reload().unwrap(), 2);
        assert_eq!(
            tokens.principal(Some(b"first-token-0123456789")),
            Err(NoValidToken)
        );
        let second = tokens.principal(Some(b"second-token-0123456789")).unwrap();
        assert!(second.allows(Scope::Write, &Name::parse("x").unwrap()));

        write("third-token-0123456789", "wirte:*");
        let err = tokens.reload().unwrap_err().to_string();
        assert!(
            err.starts_with("BATON_TOKENS_FILE (--tokens-file) = "),
            "{err}"
        );
        assert!(
            err.contains("[[token]] \"team\": allow[0]") && !err.contains("third-token"),
            "{err}"
        );
        assert!(tokens.principal(Some(b"second-token-0123456789")).is_ok());
        assert_eq!(
            tokens.principal(Some(b"third-token-0123456789")),
            Err(NoValidToken)
        );

        std::fs::remove_file(&path).unwrap();
        assert!(tokens.reload().is_err());
        assert!(tokens.principal(Some(b"second-token-0123456789")).is_ok());
        // The file is still configured: a token is still needed.
        assert_eq!(tokens.principal(None), Err(NoValidToken));
    }
}
