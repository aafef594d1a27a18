//! `baton completions SHELL` (clap_complete) and `baton man [SUBCOMMAND]`
//! (clap_mangen), both made from the command line's own declarations.

use crate::cli::exit::{Failure, USAGE};
use crate::cli::messages::show;

/// Prints the completion script for `shell` of the command line `command`.
///
/// # Errors
/// stdout cannot be written (a closed pipe ends it quietly).
pub fn completions(shell: clap_complete::Shell, mut command: clap::Command) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "baton", &mut script);
    show(script)
}

/// Prints the manual page of baton (the command line `full`), or of one of
/// its subcommands.
///
/// # Errors
/// An unknown subcommand (64), or stdout cannot be written (a closed pipe
/// ends it quietly).
pub fn man(subcommand: Option<&str>, mut full: clap::Command) -> Result<(), Failure> {
    full.build();
    let page = match subcommand {
        None => full,
        Some(name) => {
            let found = full
                .find_subcommand(name)
                .cloned()
                .ok_or_else(|| Failure::usage(format!("no subcommand {name}: see baton --help")))?;
            found.name(format!("baton-{name}"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|err| Failure::new(USAGE, format!("cannot render the page: {err}")))?;
    show(out)
}
