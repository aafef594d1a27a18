//! A setting that could not be read, as the one line that says so.

use std::fmt;

/// A setting that could not be read: shown as one line naming the variable,
/// the value (a secret never) and the form expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable, with its flag: `BATON_MAX_WAIT_MS (--max-wait-ms)`; or the
    /// command-line word that was not understood.
    pub setting: String,
    /// The value as it may be shown, `None` when there is nothing to show.
    pub value: Option<String>,
    /// What was expected instead.
    pub expected: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{} = {value:?}: {}", self.setting, self.expected),
            None => write!(f, "{}: {}", self.setting, self.expected),
        }
    }
}

impl std::error::Error for ConfigError {}
