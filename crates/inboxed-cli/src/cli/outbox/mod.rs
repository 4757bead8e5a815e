//! `inboxed outbox`: the transactional outbox's relay (docs/outbox.md).

mod relay;
mod settings;

use std::io::Write;
use std::process::ExitCode;

/// `inboxed outbox`'s subcommands.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Publish committed outbox rows to the broker, marking each sent only after the broker
    /// confirmed it; runs until Ctrl-C or SIGTERM. Several relays may run at once.
    Relay(settings::Args),
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Relay(args) => relay::run(args, out).await,
    }
}
