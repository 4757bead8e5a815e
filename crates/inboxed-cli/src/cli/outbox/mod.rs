//! `inboxed outbox`: the transactional outbox's relay, and an operator's look at its rows
//! (docs/outbox.md).

mod operate;
mod relay;
mod settings;

use std::io::Write;
use std::process::ExitCode;

use inboxed_core::outbox::DeadAction;

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
    /// List outbox rows, oldest first, without their payloads.
    List(operate::ListArgs),
    /// Show one outbox row in full: metadata, cause, headers, the payload.
    Show(operate::ShowArgs),
    /// Put dead rows back to pending, as new (attempts 0), to be published again under their
    /// ids after a fix (a queue bound, a topic created). A dry run unless given --yes;
    /// audited.
    Retry(operate::DeadArgs),
    /// Delete dead rows for good: they are never published, and the later rows of their
    /// ordering keys are free to go. A dry run unless given --yes; audited.
    Discard(operate::DeadArgs),
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Relay(args) => relay::run(args, out).await,
        Command::List(args) => operate::list(args, out).await,
        Command::Show(args) => operate::show(args, out).await,
        Command::Retry(args) => operate::dead(args, DeadAction::Retry, out).await,
        Command::Discard(args) => operate::dead(args, DeadAction::Discard, out).await,
    }
}
