//! The kernel's share of a server's CPU time, from `perf` samples
//! (`--perf-split`).
//!
//! `/proc/PID/stat` splits a process's time into user and system by what
//! the CPU was doing at each scheduler tick (`CONFIG_TICK_CPU_ACCOUNTING`,
//! 250 Hz on this machine). A server whose work follows a 50 ms tick can be
//! phase-locked to those samples: tessera's split moved 12 µs a
//! client-second between its parts, the total unchanged, when only the
//! timing of its sends changed (bench/README.md, thirteenth round). `perf
//! record` samples the process at 1,999 Hz on a timer of its own, hundreds
//! of samples per tick, so its share is the one to steer by; the absolute
//! figure still comes from `/proc` (whose total is exact).
//!
//! With call graphs (`--kernel-top N`), the same recording also says which
//! kernel functions the kernel part went to: each function's inclusive
//! share of the samples (`perf report --children`), which the bench turns
//! into µs per client-second beside the floor's (`kernel_fns`).
//!
//! Owns the `perf` child and its data file; knows nothing of servers.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Samples a second (a prime, so it does not beat with a tick).
pub const SAMPLE_HZ: u32 = 1_999;

/// Why `perf` could not give a split.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// `perf` is not installed or not runnable.
    #[error("--perf-split needs `perf` (linux-tools) on PATH: {0}")]
    Missing(std::io::Error),
    /// `perf record` or `perf report` failed (permissions: `perf_event_paranoid`).
    #[error("perf {what} failed: {stderr}")]
    Failed {
        /// Which step.
        what: &'static str,
        /// What perf said.
        stderr: String,
    },
    /// The report had no samples.
    #[error("perf report of {0} holds no samples")]
    Empty(String),
}

/// Checks that `perf` runs at all (before any child starts).
///
/// # Errors
/// [`PerfError::Missing`].
pub fn check() -> Result<(), PerfError> {
    let out = Command::new("perf")
        .arg("--version")
        .output()
        .map_err(PerfError::Missing)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(PerfError::Failed {
            what: "--version",
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// A kernel function with its inclusive share of a recording's samples
/// (0..=1: the samples in it or in what it called).
pub type KernelFn = (String, f64);

/// Below this inclusive share a kernel function is not listed (the report
/// would otherwise name thousands).
pub const KERNEL_FN_SHARE_MIN: f64 = 0.002;

/// What one recording says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    /// The kernel's share of the samples (0..=1).
    pub kernel_share: f64,
    /// With call graphs: the kernel functions (inclusive shares, at least
    /// [`KERNEL_FN_SHARE_MIN`]), largest first; else empty.
    pub kernel_fns: Vec<KernelFn>,
}

impl Split {
    /// [`Split::kernel_fns`] as parts of a total of `us`: each function's
    /// inclusive µs when the window's CPU was `us` (name, µs).
    pub fn kernel_us(self, us: f64) -> Vec<(String, f64)> {
        (self.kernel_fns.into_iter())
            .map(|(name, share)| (name, share * us))
            .collect()
    }
}

/// A `perf record` of one process over one window.
pub struct Recording {
    child: Child,
    path: PathBuf,
    call_graph: bool,
    keep: Option<PathBuf>,
}

impl Recording {
    /// Starts sampling every thread of `pid` for `window_s` seconds; with
    /// `call_graph`, with call chains (for [`Split::kernel_fns`]). With
    /// `keep`, the data file is moved there at the end instead of deleted
    /// (for `perf report -i` by hand).
    ///
    /// # Errors
    /// [`PerfError::Missing`] if `perf` cannot be started.
    pub fn start(
        pid: u32,
        window_s: f64,
        call_graph: bool,
        keep: Option<PathBuf>,
    ) -> Result<Recording, PerfError> {
        let path = std::env::temp_dir().join(format!(
            "tessera-clients-{}-{pid}.perf.data",
            std::process::id()
        ));
        let child = Command::new("perf")
            .args(["record", "-q", "-F", &SAMPLE_HZ.to_string()])
            .args(call_graph.then_some("-g"))
            .arg("-p")
            .arg(pid.to_string())
            .arg("-o")
            .arg(&path)
            .args(["--", "sleep", &format!("{window_s:.3}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(PerfError::Missing)?;
        Ok(Recording {
            child,
            path,
            call_graph,
            keep,
        })
    }

    /// Waits for the window's end; what the samples say.
    ///
    /// # Errors
    /// [`PerfError`] if recording or reporting failed or found nothing.
    pub fn finish(self) -> Result<Split, PerfError> {
        let Recording {
            child,
            path,
            call_graph,
            keep,
        } = self;
        let out = child.wait_with_output().map_err(PerfError::Missing)?;
        let result = if out.status.success() {
            split(&path, call_graph)
        } else {
            Err(PerfError::Failed {
                what: "record",
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        };
        let kept = keep.is_some_and(|to| {
            let moved = std::fs::rename(&path, &to).is_ok();
            if moved {
                eprintln!("clients: perf data kept in {}", to.display());
            }
            moved
        });
        if !kept {
            let _ = std::fs::remove_file(&path);
        }
        result
    }
}

fn split(path: &std::path::Path, call_graph: bool) -> Result<Split, PerfError> {
    // Self shares by object (`--no-children`: with call graphs perf would
    // print inclusive shares first).
    let by_dso = perf_report(path, &["--no-children", "--sort", "dso"])?;
    let kernel_share =
        kernel_share(&by_dso).ok_or_else(|| PerfError::Empty(path.display().to_string()))?;
    let kernel_fns = if call_graph {
        kernel_functions(&perf_report(path, &["--children", "--sort", "sym"])?)
    } else {
        Vec::new()
    };
    Ok(Split {
        kernel_share,
        kernel_fns,
    })
}

fn perf_report(path: &std::path::Path, how: &[&str]) -> Result<String, PerfError> {
    let out = Command::new("perf")
        .args(["report", "-q", "--stdio", "-g", "none"])
        .args(how)
        .arg("-i")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(PerfError::Missing)?;
    if !out.status.success() {
        return Err(PerfError::Failed {
            what: "report",
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The kernel functions of `perf report --children --sort sym` output
/// (lines `  45.12%   0.50%  [k] tcp_v4_rcv`: inclusive share, self
/// share, `[k]` for the kernel), as inclusive shares (0..=1) of at least
/// [`KERNEL_FN_SHARE_MIN`], largest first; user-space lines are skipped.
pub fn kernel_functions(report: &str) -> Vec<KernelFn> {
    let mut fns: Vec<KernelFn> = report
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let children = parts.next()?.strip_suffix('%')?.parse::<f64>().ok()?;
            parts.next()?.strip_suffix('%')?;
            (parts.next()? == "[k]").then_some(())?;
            let name = parts.collect::<Vec<_>>().join(" ");
            let share = children / 100.0;
            (!name.is_empty() && share >= KERNEL_FN_SHARE_MIN).then_some((name, share))
        })
        .collect();
    fns.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    fns
}

/// The kernel's share of the samples in `perf report --sort dso` output
/// (lines `  45.12%  [kernel.kallsyms]`); `None` without any sample line.
pub fn kernel_share(report: &str) -> Option<f64> {
    let (mut kernel, mut all) = (0.0, 0.0);
    for line in report.lines() {
        let mut parts = line.split_whitespace();
        let (Some(pct), Some(dso)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(pct) = pct.strip_suffix('%').and_then(|p| p.parse::<f64>().ok()) else {
            continue;
        };
        all += pct;
        if dso.starts_with("[kernel") {
            kernel += pct;
        }
    }
    (all > 0.0).then(|| kernel / all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_share_counts_kernel_lines_only() {
        let report = "\
    48.20%  [kernel.kallsyms]
    50.00%  clients
     1.30%  libc.so.6
     0.50%  [vdso]
# a comment line
";
        let s = kernel_share(report).expect("samples");
        assert!((s - 0.482).abs() < 1e-9, "{s}");
        assert_eq!(kernel_share("# nothing\n\n"), None);
        assert_eq!(kernel_share("    12.0%  [kernel.kallsyms]\n"), Some(1.0));
    }

    #[test]
    fn kernel_functions_are_the_kernel_lines_by_inclusive_share() {
        let report = "\
    60.00%     0.00%  [k] do_syscall_64
    30.50%     2.00%  [.] tessera::core::view::observer::Observer::pull
    12.25%     1.00%  [k] tcp_v4_rcv
    45.00%     0.10%  [k] io_send
     0.10%     0.10%  [k] too_small_to_list
# a comment line
";
        let fns = kernel_functions(report);
        let names: Vec<&str> = fns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["do_syscall_64", "io_send", "tcp_v4_rcv"]);
        assert!((fns[2].1 - 0.1225).abs() < 1e-12, "{fns:?}");
        assert!(kernel_functions("# nothing\n").is_empty());
    }
}
