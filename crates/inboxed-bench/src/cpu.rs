//! CPU time spent by the processes a measurement involves (this one, the broker, the
//! database server), read from `/proc`: on a machine whose cores all parties share, which of
//! them a faster configuration would have to take time from. Linux only; elsewhere it reads
//! nothing.

use std::collections::BTreeMap;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`; 100 on every Linux this runs on).
const TICKS: f64 = 100.0;

/// CPU seconds by process name (`comm`) and process id, for the names asked. Kept by process,
/// so that a process that exits between two reads (a connection's server backend closed
/// meanwhile) takes nothing away from the others: summed by name, its whole past would have
/// been subtracted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cpu(BTreeMap<String, BTreeMap<String, f64>>);

impl Cpu {
    /// Now, for `names` (a process of this benchmark is named `inboxed-bench`, truncated by
    /// the kernel to 15 bytes).
    pub(crate) fn read(names: &[&str]) -> Self {
        let mut seen = BTreeMap::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Self(seen);
        };
        for entry in dir.flatten() {
            // Processes only: `/proc/self` and `/proc/thread-self` are this process again (and
            // its reading thread), which would count its time two and a half times over.
            if !entry
                .file_name()
                .as_encoded_bytes()
                .iter()
                .all(u8::is_ascii_digit)
            {
                continue;
            }
            let path = entry.path();
            let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ... utime stime: comm may hold spaces, so split at ')'.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let comm = &stat[open + 1..close];
            let Some(name) = names.iter().find(|n| n.starts_with(comm) || comm == **n) else {
                continue;
            };
            let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
            let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
            // utime and stime are fields 14 and 15 of the line, 11 and 12 after the comm.
            if let (Some(user), Some(system)) = (ticks(11), ticks(12)) {
                let pid = entry.file_name().to_string_lossy().into_owned();
                seen.entry((*name).to_owned())
                    .or_insert_with(BTreeMap::new)
                    .insert(pid, (user + system) / TICKS);
            }
        }
        Self(seen)
    }

    /// CPU seconds of processes `name` from `self` to `later`: of each process alive at
    /// `later`, what it used since `self` (all it used, when it started after).
    pub(crate) fn used(&self, later: &Self, name: &str) -> f64 {
        let before = self.0.get(name);
        later.0.get(name).map_or(0.0, |now| {
            now.iter()
                .map(|(pid, secs)| secs - before.and_then(|b| b.get(pid)).copied().unwrap_or(0.0))
                .sum()
        })
    }

    /// Microseconds of CPU per message by process, from `self` to `later`.
    pub(crate) fn per_message(&self, later: &Self, messages: u64) -> String {
        #[allow(clippy::cast_precision_loss, reason = "message counts")]
        let n = messages.max(1) as f64;
        later
            .0
            .keys()
            .map(|name| format!("{name} {:.0} µs", self.used(later, name) / n * 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
