//! `BATON_TOKENS_FILE`: named tokens with their scopes, in TOML.
//!
//! ```toml
//! [[token]]
//! name = "team-a-ci"     # who, in audit lines and history (`by`)
//! sha256 = "9f86d0…"     # the SHA-256 of the token in hex (or value = "…")
//! allow = ["write:team-a-*", "read:*"]
//! expires = "2026-12-31T00:00:00Z"  # optional: refused like a removed token after it
//! max_priority = 4       # optional: the highest `priority` it may ask (default 9)
//! ```
//!
//! A file is refused as a whole, naming the entry, when two entries share a
//! `name`, when a `value` is shorter than [`MIN_VALUE_LEN`] characters, or
//! (by [`super::Tokens`]) when a token is also given by `BATON_API_TOKENS` or
//! `BATON_ADMIN_TOKENS`.
//!
//! It may also hold `[[issuer]]` entries: the OpenID Connect issuers whose
//! job tokens are taken, read by [`super::oidc::config`].
//!
//! The `toml` crate reads the syntax; this file reads the entries, by hand,
//! so that every message names the entry (by its `name`, or its number when
//! it has none) and what is wrong with it, and none ever shows a token (nor
//! its digest): a value is never quoted, whatever its type.
//!
//! `file.rs` reads the file as a whole (its syntax, its top-level keys, the
//! uniqueness of names and tokens); `entry.rs` reads one `[[token]]` entry.

mod entry;
mod file;

pub use entry::{FileToken, ADMIN_TOKENS_NAME, API_TOKENS_NAME, MIN_VALUE_LEN};
pub use file::{parse, parse_file, read, TokenFile};
