//! The default owner label of a lease: the CI job's URL, from the standard
//! variables of GitHub Actions, GitLab CI, Jenkins and Buildkite; else
//! user@host.

use crate::domain::{Printable, MAX_OWNER_LEN};

/// The owner from the variables `var` gives (the process environment in
/// use); `host` is asked only when nothing else names one.
pub fn default_owner(var: impl Fn(&str) -> Option<String>, host: impl Fn() -> String) -> String {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    let is_true = |name: &str| var(name).as_deref() == Some("true");
    if is_true("GITHUB_ACTIONS") {
        if let Some(run) = set("GITHUB_RUN_ID") {
            let server = set("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into());
            let repo = set("GITHUB_REPOSITORY").unwrap_or_default();
            return format!("{server}/{repo}/actions/runs/{run}");
        }
    }
    if is_true("GITLAB_CI") {
        if let Some(url) = set("CI_JOB_URL") {
            return url;
        }
    }
    if set("JENKINS_URL").is_some() {
        if let Some(url) = set("BUILD_URL") {
            return url;
        }
    }
    if is_true("BUILDKITE") {
        if let Some(url) = set("BUILDKITE_BUILD_URL") {
            return match set("BUILDKITE_JOB_ID") {
                Some(job) => format!("{url}#{job}"),
                None => url,
            };
        }
    }
    let user = set("USER").unwrap_or_else(|| "unknown".into());
    let host = set("HOSTNAME").unwrap_or_else(host);
    format!("{user}@{host}")
}

/// The label made acceptable to the service: unprintable characters dropped,
/// at most 200 characters.
pub fn clean(raw: &str) -> String {
    raw.chars()
        .filter(|c| Printable::Owner.allows(*c))
        .take(MAX_OWNER_LEN)
        .collect()
}

/// This machine's host name.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it or truncates, and the length below stops at the first NUL.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    if ok && len > 0 {
        String::from_utf8_lossy(&buf[..len]).into_owned()
    } else {
        "unknown".into()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn owner(vars: &[(&str, &str)]) -> String {
        let vars: HashMap<&str, &str> = vars.iter().copied().collect();
        default_owner(|k| vars.get(k).map(|v| (*v).to_owned()), || "box".into())
    }

    #[test]
    fn the_ci_job_url_is_the_owner() {
        assert_eq!(
            owner(&[
                ("GITHUB_ACTIONS", "true"),
                ("GITHUB_SERVER_URL", "https://github.com"),
                ("GITHUB_REPOSITORY", "acme/shop"),
                ("GITHUB_RUN_ID", "42")
            ]),
            "https://github.com/acme/shop/actions/runs/42"
        );
        assert_eq!(
            owner(&[("GITLAB_CI", "true"), ("CI_JOB_URL", "https://gl/j/7")]),
            "https://gl/j/7"
        );
        assert_eq!(
            owner(&[
                ("JENKINS_URL", "https://ci/"),
                ("BUILD_URL", "https://ci/9/")
            ]),
            "https://ci/9/"
        );
        assert_eq!(
            owner(&[
                ("BUILDKITE", "true"),
                ("BUILDKITE_BUILD_URL", "https://bk/5"),
                ("BUILDKITE_JOB_ID", "j-1")
            ]),
            "https://bk/5#j-1"
        );
        assert_eq!(owner(&[("USER", "alice")]), "alice@box");
    }

    #[test]
    fn labels_are_made_printable_and_short() {
        assert_eq!(clean("a\tb\u{202E}c"), "abc");
        assert_eq!(clean(&"x".repeat(300)).len(), 200);
    }
}
