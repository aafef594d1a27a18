//! What a token may do to a name: read it, write it, or administer it.

use std::fmt;

use super::Invalid;

/// A scope of a token on some names. Each implies the ones below it:
/// `read` < `write` < `admin`, so `Ord` says which is the stronger.
///
/// - `read`: status, listings, history, `/events`, the holder's stream;
/// - `write`: acquire, refresh, release, the check of a lease, yield;
/// - `admin`: force-release, freezes, `override`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Read,
    Write,
    Admin,
}

impl Scope {
    /// Every scope, weakest first.
    pub const ALL: [Self; 3] = [Self::Read, Self::Write, Self::Admin];

    /// `read`, `write` or `admin`.
    ///
    /// # Errors
    /// Any other word.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Self::ALL
            .into_iter()
            .find(|scope| scope.as_str() == raw)
            .ok_or_else(|| Invalid(format!("{raw:?} is not a scope: read, write or admin")))
    }

    /// As a token file and a 403 write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }

    /// What a holder of this scope may do to a name, as a verb: "may not
    /// {verb} \"deploy\"".
    pub fn verb(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "administer",
        }
    }

    /// Whether this scope allows what `needed` allows.
    pub fn implies(self, needed: Self) -> bool {
        self >= needed
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scope_implies_the_ones_below_it() {
        use Scope::{Admin, Read, Write};
        assert!(Admin.implies(Write) && Admin.implies(Read) && Admin.implies(Admin));
        assert!(Write.implies(Read) && Write.implies(Write));
        assert!(!Write.implies(Admin) && !Read.implies(Write) && !Read.implies(Admin));
    }

    #[test]
    fn scopes_read_back_what_they_write() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()).unwrap(), scope);
        }
        for bad in ["", "Read", "WRITE", "wirte", "admin ", "*"] {
            let err = Scope::parse(bad).unwrap_err();
            assert!(err.0.contains("read, write or admin"), "{bad:?}: {err}");
        }
    }
}
