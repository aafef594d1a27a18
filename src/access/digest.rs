//! The SHA-256 of a token: what tokens are stored and looked up by.

use std::fmt;

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

/// The SHA-256 of a bearer token. A token file may hold only this
/// (`sha256 = "…"`), and every configured token is kept as this alone, so
/// that the set in memory holds no token, and a lookup costs one hash and
/// one map probe however many tokens there are.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    /// The digest of `token` as presented.
    pub fn of(token: &[u8]) -> Self {
        Self(Sha256::digest(token).into())
    }

    /// 64 hexadecimal digits, either case (`sha256sum`'s output).
    pub fn from_hex(hex: &str) -> Option<Self> {
        let hex = hex.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            *byte = u8::from_str_radix(text, 16).ok()?;
        }
        Some(Self(out))
    }

    /// Equal, compared in constant time.
    pub fn same_as(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

/// Never shown: a digest of a weak token is as good as the token to
/// whoever can try guesses offline.
impl fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenDigest(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_reads_what_sha256sum_prints() {
        // printf test | sha256sum
        let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let digest = TokenDigest::from_hex(hex).unwrap();
        assert!(digest.same_as(&TokenDigest::of(b"test")));
        assert!(TokenDigest::from_hex(&hex.to_uppercase())
            .unwrap()
            .same_as(&digest));
        assert!(!digest.same_as(&TokenDigest::of(b"tes")));
        for bad in [
            "",
            &hex[1..],
            &format!("{hex}0"),
            &hex.replace('9', "g"),
            &format!("é{}", &hex[2..]),
        ] {
            assert!(TokenDigest::from_hex(bad).is_none(), "{bad}");
        }
        assert_eq!(format!("{digest:?}"), "TokenDigest(…)");
    }
}
