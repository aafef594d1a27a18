//! Who may do what: bearer tokens and their scopes.
//!
//! A request's bearer token is looked up by its SHA-256 among the tokens in
//! force ([`Tokens`]: `BATON_API_TOKENS` as `write:*`, `BATON_ADMIN_TOKENS`
//! as `admin:*`, and the named, scoped tokens of `BATON_TOKENS_FILE`),
//! which SIGHUP, or a change of the file, reads again and swaps whole. What it finds is a
//! [`Principal`]: the token's name (`by` in audit lines and history) and
//! its grants, which every route asks before it touches a name.
//!
//! - [`principal`]: the caller, its checks, and the refusal ([`Denied`]).
//! - [`tokens`]: the set in force and its reload; [`keyring`]: one set,
//!   looked up by digest; [`digest`]: a token's SHA-256.
//! - [`tokens_file`]: the TOML file of named tokens (`allow.rs`: an entry's
//!   scopes, read alike for tokens and issuers' rules).
//! - [`oidc`]: CI job identity: the OpenID Connect tokens of `[[issuer]]`s.
//! - `hangup.rs` ([`follow_token_file`]): SIGHUP, or a change of the file
//!   (looked at every second), reads it again; a token's `expires` passing
//!   changes the set in force too.
//! - [`Standing`]: what a stream or a wait opened before a change learns of
//!   it, at once (its token looked up again).
//! - [`Quotas`]: no token holds more than half of an instance's waiters or
//!   event streams.

mod allow;
pub mod digest;
mod hangup;
pub mod keyring;
pub mod oidc;
pub mod principal;
mod quotas;
mod standing;
pub mod tokens;
pub mod tokens_file;

pub use hangup::{follow_token_file, WATCH_INTERVAL};
pub use principal::{Denied, Principal, PriorityDenied};
pub use quotas::{OverQuota, Quota, QuotaSlot, Quotas, Whose};
pub use standing::{identify_standing, Standing};
pub use tokens::{NoValidToken, Tokens, Unidentified};
