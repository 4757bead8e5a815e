//! The `inboxed` command-line tool. Everything lives in the `cli` module so that tests can
//! run a command against a writer instead of the terminal.

mod cli;

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("INBOXED_LOG")
        .unwrap_or_else(|_| args.default_log_filter().into());
    // Colour only for a terminal: a log file or a journal gets no escape codes.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if args.log_format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
    let mut out = std::io::stdout();
    match cli::run(args, &mut out).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
