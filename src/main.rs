//! The `baton` binary: settings -> telemetry -> Application::build -> run until
//! SIGINT or SIGTERM.

use std::process::ExitCode;

use baton::config::Settings;
use baton::startup::Application;

#[tokio::main]
async fn main() -> ExitCode {
    baton::telemetry::init_logging();
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(err) => {
            tracing::error!("bad configuration: {err}");
            return ExitCode::from(2);
        }
    };
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(err) => {
            tracing::error!("cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    match app.run_until(baton::shutdown::signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("serving failed: {err}");
            ExitCode::FAILURE
        }
    }
}
