//! The variables that hand a held lease on: `baton run` sets them for
//! COMMAND, `baton acquire --output env|shell` prints them for later steps,
//! and a nested `baton run`, `baton refresh`, `release` and `status` read
//! them. Written and read here only.

use crate::domain::Kind;

use crate::cli::exit::Failure;

pub const NAME: &str = "BATON_LOCK_NAME";
pub const ID: &str = "BATON_LEASE_ID";
pub const FENCING_TOKEN: &str = "BATON_FENCING_TOKEN";
pub const KIND: &str = "BATON_KIND";
pub const LIMIT: &str = "BATON_LIMIT";

/// A lease as the variables carry it. Nothing here says that it is still
/// held: only the service can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseVariables {
    pub name: String,
    /// The lease id: a secret, never shown.
    pub id: String,
    pub fencing_token: Option<u64>,
    pub kind: Kind,
    /// A semaphore's limit.
    pub limit: Option<u32>,
}

impl LeaseVariables {
    /// The lease of `name` in this process's environment, if there is one.
    ///
    /// # Errors
    /// `BATON_KIND` or `BATON_LIMIT` set to something else than they can be
    /// (64), for that name.
    pub fn from_env(name: &str) -> Result<Option<Self>, Failure> {
        Self::from_lookup(name, |key| std::env::var(key).ok())
    }

    /// The lease of `name` that `var` (a lookup of variables) describes, if
    /// any: it needs that name and an id.
    ///
    /// # Errors
    /// As [`Self::from_env`].
    pub fn from_lookup(
        name: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, Failure> {
        let set = |key: &str| var(key).filter(|v| !v.is_empty());
        let (Some(name), Some(id)) = (set(NAME).filter(|n| n == name), set(ID)) else {
            return Ok(None);
        };
        let kind = match set(KIND).as_deref() {
            None | Some("lock") => Kind::Lock,
            Some("semaphore") => Kind::Semaphore,
            Some(other) => {
                return Err(Failure::usage(format!(
                    "{KIND} must be lock or semaphore (got '{other}')"
                )))
            }
        };
        let limit = match set(LIMIT) {
            None => None,
            Some(raw) => Some(raw.parse().map_err(|_| {
                Failure::usage(format!("{LIMIT} must be a whole number (got '{raw}')"))
            })?),
        };
        Ok(Some(Self {
            name,
            id,
            fencing_token: set(FENCING_TOKEN).and_then(|t| t.parse().ok()),
            kind,
            limit: limit.filter(|_| kind == Kind::Semaphore),
        }))
    }

    /// `(variable, value)` pairs, in the order they are printed. The kind is
    /// always there, so that a lock's lines replace an earlier semaphore's in
    /// `$GITHUB_ENV`.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (NAME, self.name.clone()),
            (ID, self.id.clone()),
            (
                FENCING_TOKEN,
                self.fencing_token
                    .map(|t| t.to_string())
                    .unwrap_or_default(),
            ),
            (KIND, self.kind.as_str().to_owned()),
        ];
        if let Some(limit) = self.limit {
            pairs.push((LIMIT, limit.to_string()));
        }
        pairs
    }

    /// `KEY=value` lines, as `$GITHUB_ENV` and GitLab's dotenv files take
    /// them: values as they are (a name may hold spaces and quotes), so not
    /// for a shell to source.
    pub fn env_lines(&self) -> String {
        self.pairs()
            .into_iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect()
    }

    /// `export KEY='value'` lines, quoted for any POSIX shell to `eval` or
    /// source, whatever the name holds.
    pub fn shell_lines(&self) -> String {
        self.pairs()
            .into_iter()
            .map(|(key, value)| format!("export {key}={}\n", quote(&value)))
            .collect()
    }
}

/// `value` in single quotes for sh, each `'` written as `'\''`. (Names and
/// ids hold no NUL, the one byte a shell word cannot.)
pub(crate) fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<Option<LeaseVariables>, Failure> {
        let vars: HashMap<&str, &str> = vars.iter().copied().collect();
        LeaseVariables::from_lookup("x", |k| vars.get(k).map(|v| (*v).to_owned()))
    }

    #[test]
    fn a_lease_needs_the_name_and_an_id() {
        assert_eq!(from(&[]), Ok(None));
        assert_eq!(from(&[(NAME, "x"), (ID, "")]), Ok(None));
        // Another name's variables, however odd, are not this one's.
        assert_eq!(from(&[(NAME, "y"), (ID, "i"), (KIND, "mutex")]), Ok(None));
        let lease = from(&[(NAME, "x"), (ID, "i"), (FENCING_TOKEN, "7")])
            .unwrap()
            .unwrap();
        assert_eq!(
            (lease.kind, lease.limit, lease.fencing_token),
            (Kind::Lock, None, Some(7))
        );
        let lease = from(&[(NAME, "x"), (ID, "i"), (KIND, "semaphore"), (LIMIT, "4")])
            .unwrap()
            .unwrap();
        assert_eq!((lease.kind, lease.limit), (Kind::Semaphore, Some(4)));
        // A limit left over from an earlier semaphore does not make a lock one.
        let lease = from(&[(NAME, "x"), (ID, "i"), (KIND, "lock"), (LIMIT, "4")])
            .unwrap()
            .unwrap();
        assert_eq!((lease.kind, lease.limit), (Kind::Lock, None));
        for bad in [
            &[(KIND, "mutex")][..],
            &[(KIND, "semaphore"), (LIMIT, "four")],
        ] {
            let mut vars = vec![(NAME, "x"), (ID, "i")];
            vars.extend_from_slice(bad);
            assert_eq!(from(&vars).unwrap_err().status, crate::cli::exit::USAGE);
        }
    }

    #[test]
    fn env_lines_are_plain_and_shell_lines_are_quoted() {
        let lease = LeaseVariables {
            name: "it's a $x `y` \"z\"".into(),
            id: "i".into(),
            fencing_token: Some(3),
            kind: Kind::Semaphore,
            limit: Some(2),
        };
        assert_eq!(
            lease.env_lines(),
            "BATON_LOCK_NAME=it's a $x `y` \"z\"\nBATON_LEASE_ID=i\nBATON_FENCING_TOKEN=3\n\
             BATON_KIND=semaphore\nBATON_LIMIT=2\n"
        );
        assert_eq!(
            lease.shell_lines().lines().next(),
            Some(r#"export BATON_LOCK_NAME='it'\''s a $x `y` "z"'"#)
        );
    }
}
