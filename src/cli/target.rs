//! One lock or semaphore of the service, as the client names it in paths
//! and in messages.

use crate::cli::exit::Failure;
use crate::domain::{Kind, Name};

/// One lock or semaphore of the service.
#[derive(Debug, Clone)]
pub struct Target {
    pub kind: Kind,
    pub name: Name,
}

impl Target {
    /// # Errors
    /// A name the service would refuse (exit 64).
    pub fn new(kind: Kind, name: &str) -> Result<Self, Failure> {
        let name = Name::parse(name).map_err(|err| Failure::usage(format!("NAME {err}")))?;
        Ok(Self { kind, name })
    }

    /// `/locks/review%2Fapp-1`
    pub fn path(&self) -> String {
        format!("/{}/{}", self.kind.plural(), self.name.path_segment())
    }

    /// `/locks/review%2Fapp-1/{id}`; the id is percent-encoded too, so that
    /// whatever a user passes stays one path segment.
    pub fn lease_path(&self, id: &str) -> String {
        let id = Name::parse(id).map_or_else(|_| String::new(), |id| id.path_segment());
        format!("{}/{id}", self.path())
    }
}

impl std::fmt::Display for Target {
    /// `lock 'review/app-1'`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} '{}'", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::exit::USAGE;

    #[test]
    fn names_become_one_path_segment() {
        let target = Target::new(Kind::Lock, "review/app 1:é").unwrap();
        assert_eq!(target.path(), "/locks/review%2Fapp%201%3A%C3%A9");
        let target = Target::new(Kind::Semaphore, "x").unwrap();
        assert_eq!(target.lease_path("a/b"), "/semaphores/x/a%2Fb");
        assert_eq!(Target::new(Kind::Lock, "").unwrap_err().status, USAGE);
    }
}
