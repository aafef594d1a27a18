//! `baton completions SHELL` (clap_complete) and `baton man [SUBCOMMAND]`
//! (clap_mangen), both made from the command line's own declarations.

use super::args::command;
use super::exit::{Failure, USAGE};
use super::messages::show;

/// Prints the completion script for `shell`.
///
/// # Errors
/// stdout cannot be written (a closed pipe ends it quietly).
pub fn completions(shell: clap_complete::Shell) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "baton", &mut script);
    show(script)
}

/// Prints the manual page of baton, or of one of its subcommands.
///
/// # Errors
/// An unknown subcommand (64), or stdout cannot be written (a closed pipe
/// ends it quietly).
pub fn man(subcommand: Option<&str>) -> Result<(), Failure> {
    let mut full = command();
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
