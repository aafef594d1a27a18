//! Bearer tokens: a comma-separated list in a variable, or a file of them
//! (a container secret) added to it.

use super::error::ConfigError;

/// `" a, b ,,c"` -> `["a", "b", "c"]`.
pub(super) fn token_list(raw: &str) -> Result<Vec<String>, String> {
    Ok(raw
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect())
}

/// `BATON_WEBHOOK_HOSTS`: `" a.example.com, B.example.com"` -> `["a.example.com",
/// "b.example.com"]`; each a host name (or address) alone, no scheme or path.
pub(super) fn host_list(raw: &str) -> Result<Vec<String>, String> {
    let hosts = token_list(raw)?;
    for host in &hosts {
        if host.contains(['/', ':', '@', ' ']) && !host.starts_with('[') {
            return Err(format!(
                "comma-separated host names (such as hooks.example.com), not {host:?}"
            ));
        }
    }
    Ok(hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect())
}

/// The tokens of a secret file: comma- or newline-separated, blanks ignored.
pub(super) fn read_tokens(
    path: &std::path::Path,
    setting: &str,
) -> Result<Vec<String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
        setting: setting.to_owned(),
        value: Some(path.display().to_string()),
        expected: format!("a readable file of tokens ({err})"),
    })?;
    let tokens = token_list(&text.replace(['\n', '\r'], ",")).map_err(|expected| ConfigError {
        setting: setting.to_owned(),
        value: Some(path.display().to_string()),
        expected,
    })?;
    if tokens.is_empty() {
        return Err(ConfigError {
            setting: setting.to_owned(),
            value: Some(path.display().to_string()),
            expected: "a file with at least one token".to_owned(),
        });
    }
    Ok(tokens)
}
