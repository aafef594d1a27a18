//! Sets `BATON_GIT_REVISION` for `baton --version` and `baton_build_info`:
//! the variable of that name when the build is given one (the Dockerfile's
//! build argument: its context has no `.git`), else `git rev-parse --short
//! HEAD`, else "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=BATON_GIT_REVISION");
    let given = std::env::var("BATON_GIT_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty() && r != "unknown");
    let revision = given
        .or_else(|| {
            // Rebuilt when HEAD moves: a commit, a checkout, a fetch into packed refs.
            // (A file that does not exist would rerun this script every time.)
            let reference = git(&["symbolic-ref", "-q", "HEAD"]);
            for file in ["HEAD", "packed-refs"]
                .into_iter()
                .chain(reference.as_deref())
            {
                if let Some(path) = git(&["rev-parse", "--git-path", file]) {
                    if std::path::Path::new(&path).exists() {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
            }
            git(&["rev-parse", "--short", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=BATON_GIT_REVISION={revision}");
}
