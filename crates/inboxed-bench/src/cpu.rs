//! CPU time spent by the processes a measurement involves (this one, the broker, the
//! database server), read from `/proc`: on a machine whose cores all parties share, which of
//! them a faster configuration would have to take time from. Linux only; elsewhere it reads
//! nothing.

use std::collections::BTreeMap;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`; 100 on every Linux this runs on).
const TICKS: f64 = 100.0;

/// CPU seconds by process name (`comm`), for the names asked: of each process, its own time
/// and that of its children it has reaped. A process that exits between two reads (a
/// connection's server backend closed meanwhile) leaves the first read, and its whole time
/// lands in its parent's (the postmaster's) reaped children's: the difference of the sums is
/// exactly what it used in between. Counting only processes alive at both reads lost the
/// backends of connections closed before the second (pgmq's worker at 1 worker read 0 µs of
/// server time a job).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cpu(BTreeMap<String, f64>);

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
            // utime, stime, cutime and cstime are fields 14 to 17 of the line, 11 to 14 after
            // the comm.
            let ticks: f64 = (11..=14).filter_map(ticks).sum();
            *seen.entry((*name).to_owned()).or_insert(0.0) += ticks / TICKS;
        }
        Self(seen)
    }

    /// CPU seconds of processes `name` from `self` to `later`.
    pub(crate) fn used(&self, later: &Self, name: &str) -> f64 {
        later.0.get(name).copied().unwrap_or(0.0) - self.0.get(name).copied().unwrap_or(0.0)
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

#[cfg(test)]
mod tests {
    use super::Cpu;

    /// A child that burns CPU and exits between two reads still counts, in the time of the
    /// parent that reaped it: counting only processes alive at both reads, it read nothing.
    #[test]
    fn an_exited_child_counts_in_its_parent() {
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        let me = comm.trim_end();
        let before = Cpu::read(&[me]);
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        let used = before.used(&Cpu::read(&[me]), me);
        assert!(used >= 0.2, "the child's CPU was not counted: {used} s");
    }
}
