//! `inboxed-bench all`: the whole suite in one command. Each scenario runs as a child process
//! of this binary (a fresh process per scenario, so one's memory or connections cannot skew the
//! next); its output goes into docs/bench/runs.md between the scenario's markers
//! (`<!-- bench:NAME -->` … `<!-- /bench:NAME -->`, appended at the end when missing), with the
//! command and date, and its plot points become SVG charts beside it. The prose around the
//! markers (what each figure means, what was profiled) is the maintainers'; the figures
//! between them are the suite's.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use sqlx::Connection as _;

use crate::plot;

/// The suite: which scenarios, and where the results go.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scenarios to run (comma-separated); all of them by default.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The Markdown file whose marked sections are rewritten.
    #[arg(long, default_value = "docs/bench/runs.md")]
    write: PathBuf,
    /// Directory of the SVG charts (relative paths in the Markdown are taken from the file's
    /// directory).
    #[arg(long, default_value = ".")]
    plots: PathBuf,
}

/// Every scenario with the arguments the suite gives it: defaults, with the store-then-process
/// grid sampled (its full grid alone takes 11 minutes) and the sizing limited to the adopted
/// layouts. The whole suite takes about 40 minutes on a 2-core machine.
const SUITE: &[(&str, &[&str])] = &[
    ("processor", &[]),
    ("batch", &[]),
    ("ids", &[]),
    ("receipt", &[]),
    ("defaults", &[]),
    ("recovery", &[]),
    ("inbox", &["--workers", "1,4,8", "--batches", "10,100,500"]),
    ("retention", &[]),
    (
        "sizing",
        &["--rows", "1000000,10000000", "--layouts", "plain,partition"],
    ),
    ("rabbitmq", &[]),
    ("relay", &[]),
    ("memory", &[]),
    ("outbox", &[]),
];

/// Chart names the scenarios print, with title, axis labels and whether x is logarithmic.
const CHARTS: &[(&str, &str, &str, &str, bool)] = &[
    (
        "processor-workers",
        "One message per transaction",
        "workers",
        "messages per second",
        false,
    ),
    (
        "batch-size",
        "Batched processor, 8 workers",
        "messages per batch (log scale)",
        "messages per second",
        true,
    ),
];

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let chosen: Vec<&(&str, &[&str])> = SUITE
        .iter()
        .filter(|(name, _)| args.only.is_empty() || args.only.iter().any(|o| o == name))
        .collect();
    anyhow::ensure!(!chosen.is_empty(), "no scenario named {:?}", args.only);
    let started = Instant::now();
    for (name, extra) in chosen {
        eprintln!(
            "== {name} ({:.0} s into the suite)",
            started.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        // Nothing else runs meanwhile: waiting on the child blocks this thread on purpose.
        let out = std::process::Command::new(&exe)
            .args(["--database-url", server, name])
            .args(*extra)
            .stderr(std::process::Stdio::inherit())
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        anyhow::ensure!(
            out.status.success(),
            "scenario {name} failed ({}):\n{stdout}",
            out.status
        );
        let secs = t.elapsed().as_secs_f64();
        let charts = write_charts(&args, &stdout)?;
        let command = std::iter::once(*name)
            .chain(extra.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        let section = section(&command, &today(server).await?, secs, &stdout, &charts);
        replace_marked(&args.write, name, &section)?;
    }
    eprintln!("suite done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Writes the SVG of every chart in `output`; their paths relative to the Markdown file.
fn write_charts(args: &Args, output: &str) -> anyhow::Result<Vec<(String, String)>> {
    let base = args.write.parent().unwrap_or(Path::new(""));
    let dir = base.join(&args.plots);
    let mut written = Vec::new();
    for (name, chart) in plot::collect(output) {
        let (title, x, y, log_x) = CHARTS
            .iter()
            .find(|c| c.0 == name)
            .map_or((name.as_str(), "", "", false), |c| (c.1, c.2, c.3, c.4));
        std::fs::create_dir_all(&dir)?;
        let file = format!("{name}.svg");
        std::fs::write(dir.join(&file), plot::svg(&chart, title, x, y, log_x))?;
        let rel = args.plots.join(&file).to_string_lossy().into_owned();
        written.push((title.to_owned(), rel));
    }
    Ok(written)
}

/// A scenario's generated section: date, command, its output without plot lines, its charts.
fn section(
    command: &str,
    date: &str,
    secs: f64,
    output: &str,
    charts: &[(String, String)],
) -> String {
    let mut s = format!(
        "Run of {date} ({secs:.0} s), generated by `inboxed-bench all`:\n\n```sh\ncargo run --release -p inboxed-bench -- {command}\n```\n\n"
    );
    // Tables as they are; every other line (settings, rounds) as an item of a list, so that
    // Markdown keeps them apart.
    for line in output.lines().filter(|l| !l.starts_with("plot\t")) {
        if !line.is_empty() && !line.starts_with('|') && !line.starts_with("- ") {
            s.push_str("- ");
        }
        s.push_str(line);
        s.push('\n');
    }
    for (title, path) in charts {
        s.push_str(&format!("\n![{title}]({path})\n"));
    }
    s
}

/// Puts `body` between `name`'s markers in `file`, or appends a marked section.
fn replace_marked(file: &Path, name: &str, body: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let (open, close) = (
        format!("<!-- bench:{name} -->"),
        format!("<!-- /bench:{name} -->"),
    );
    let fresh = format!("{open}\n{body}{close}");
    let updated = match (text.find(&open), text.find(&close)) {
        (Some(a), Some(b)) if a < b => {
            format!("{}{fresh}{}", &text[..a], &text[b + close.len()..])
        }
        _ => format!(
            "{}\n\n## `{name}` (generated)\n\n{fresh}\n",
            text.trim_end()
        ),
    };
    std::fs::write(file, updated).with_context(|| format!("writing {}", file.display()))
}

/// The server's date (UTC), the day the figures were measured.
async fn today(server: &str) -> anyhow::Result<String> {
    let mut conn = sqlx::PgConnection::connect(server).await?;
    let date = sqlx::query_scalar("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
        .fetch_one(&mut conn)
        .await?;
    Ok(date)
}
