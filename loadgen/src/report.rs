//! Collecting the threads' per-second measurements into a time series and
//! the run's totals, and writing them out: the live line, the summary table
//! and the JSON report.
//!
//! Owns [`Collector`] (merges [`Interval`]s per second and over the steady
//! window, i.e. after the ramp and before the bots stop), [`Sample`] (one
//! second of the series), [`Summary`] (every figure of the run, serialised
//! as the `--json` report) and the text renderings. Knows nothing of
//! sockets or executors.

use serde::Serialize;
use serde_json::Value;

use crate::measure::{Counters, Interval, Percentiles};

/// One second of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the start.
    pub t_s: f64,
    /// Bots welcomed and not gone.
    pub connected: u64,
    /// Updates received per second (all bots).
    pub updates_per_s: u64,
    /// Bytes received per second (all bots).
    pub bytes_in_per_s: u64,
    /// Update latency of this second, ms.
    pub latency_ms: Percentiles,
    /// Input acknowledgement round trip of this second, ms.
    pub ack_rtt_ms: Percentiles,
    /// Server migrations so far (if known).
    pub migrations: Option<u64>,
    /// Each shard's tick work p99 over its last metrics window (about this
    /// second), ms; empty if the server does not say.
    pub shard_tick_p99_ms: Vec<f64>,
    /// Client-side cell crossings this second.
    pub crossings: u64,
    /// Violations so far.
    pub violations: u64,
}

/// What the server said of itself at the end of one second.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSecond {
    /// Migrations so far (if known).
    pub migrations: Option<u64>,
    /// Each shard's tick work p99 over its last metrics window, ms.
    pub shard_tick_p99_ms: Vec<f64>,
}

/// Merges the threads' reports (see the module doc).
#[derive(Debug, Default)]
pub struct Collector {
    /// Everything since the start.
    pub total: Interval,
    /// Only the steady window.
    pub steady: Interval,
    /// Seconds in the steady window.
    pub steady_s: f64,
    /// Sum over the steady seconds of the bots connected (bot-seconds).
    pub steady_bot_s: f64,
    /// Per steady second, the hottest shard's tick p99 of its last metrics
    /// window, ms (seconds the server said nothing of are left out).
    pub steady_hottest_tick_ms: Vec<f64>,
    /// Most bots connected at once.
    pub connected_max: u64,
    /// The series.
    pub series: Vec<Sample>,
}

impl Collector {
    /// Adds one second: `second` is what all threads reported for it;
    /// `steady` says whether it lies in the steady window.
    pub fn push_second(
        &mut self,
        t_s: f64,
        second: &Interval,
        steady: bool,
        server: ServerSecond,
    ) -> &Sample {
        self.total.add(second);
        let connected = self.total.counters.connected();
        self.connected_max = self.connected_max.max(connected);
        if steady {
            self.steady.add(second);
            self.steady_s += 1.0;
            self.steady_bot_s += connected as f64;
            if let Some(h) = server.shard_tick_p99_ms.iter().copied().reduce(f64::max) {
                self.steady_hottest_tick_ms.push(h);
            }
        }
        let c = &second.counters;
        self.series.push(Sample {
            t_s,
            connected,
            updates_per_s: c.updates,
            bytes_in_per_s: c.bytes_in,
            latency_ms: Percentiles::of(&second.hists.update_latency),
            ack_rtt_ms: Percentiles::of(&second.hists.ack_rtt),
            migrations: server.migrations,
            shard_tick_p99_ms: server.shard_tick_p99_ms,
            crossings: c.crossings,
            violations: self.total.counters.violations,
        });
        self.series.last().expect("just pushed")
    }

    /// Adds what arrived after the last second (final reports).
    pub fn push_tail(&mut self, tail: &Interval) {
        self.total.add(tail);
    }
}

/// The live line of one second.
pub fn live_line(s: &Sample, bots: u32) -> String {
    let mig = s.migrations.map_or("-".to_owned(), |m| m.to_string());
    format!(
        "t={:>5.1}s bots {:>5}/{:<5} upd/s {:>8} KiB/s {:>8.0} lat p50 {:>6.1} p99 {:>7.1} max {:>7.1} ms  ack p99 {:>6.1} ms  migr {:>6} viol {}",
        s.t_s,
        s.connected,
        bots,
        s.updates_per_s,
        s.bytes_in_per_s as f64 / 1024.0,
        s.latency_ms.p50,
        s.latency_ms.p99,
        s.latency_ms.max,
        s.ack_rtt_ms.p99,
        mig,
        s.violations
    )
}

/// Per-bot-per-second rates over the steady window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Updates received.
    pub updates: f64,
    /// Bytes received.
    pub bytes_in: f64,
    /// Bytes sent.
    pub bytes_out: f64,
    /// Moves sent.
    pub moves: f64,
    /// Enters.
    pub enters: f64,
    /// Leaves.
    pub leaves: f64,
    /// Level-of-detail catch-ups (Detail events).
    pub details: f64,
}

impl Rates {
    /// `counters` divided by `bot_s` bot-seconds (zero if none).
    pub fn of(c: &Counters, bot_s: f64) -> Rates {
        let per = |v: u64| if bot_s > 0.0 { v as f64 / bot_s } else { 0.0 };
        Rates {
            updates: per(c.updates),
            bytes_in: per(c.bytes_in),
            bytes_out: per(c.bytes_out),
            moves: per(c.moves),
            enters: per(c.enters),
            leaves: per(c.leaves),
            details: per(c.details),
        }
    }
}

/// Every figure of a run (the `--json` report).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// The run's settings.
    pub settings: Value,
    /// Bots asked for.
    pub bots: u32,
    /// Most bots connected at once.
    pub bots_connected: u64,
    /// Length of the steady window (after the ramp, until bots stop), s.
    pub duration_s: f64,
    /// Violations over the whole run (session and view rules).
    pub violations: u64,
    /// A few of them described.
    pub violation_samples: Vec<String>,
    /// Server migrations in the steady window (client-side crossing
    /// estimate if the server's figures are unavailable).
    pub migrations: u64,
    /// Where `migrations` came from: "server" or "client-estimate".
    pub migrations_source: &'static str,
    /// Migrations per second in the steady window.
    pub migrations_per_s: f64,
    /// End-to-end update latency (steady window), ms.
    pub update_latency_ms: Percentiles,
    /// Input acknowledgement round trip (steady window), ms.
    pub ack_rtt_ms: Percentiles,
    /// Hit round trip (steady window), ms.
    pub hit_rtt_ms: Percentiles,
    /// Gaps in bots' own update streams (steady window), ms.
    pub own_gap_ms: Percentiles,
    /// The largest own-stream gap after a cell crossing, per crossing, ms.
    pub migration_gap_ms: Percentiles,
    /// Crossings (steady window) after which a moving bot got no own
    /// update for the whole window: their gap is in `migration_gap_ms` as
    /// at least the window, and counted here.
    pub migration_gap_overflow: u64,
    /// Updates received per bot per second (steady window).
    pub updates_per_bot_per_s: f64,
    /// Bytes received per bot per second (steady window).
    pub bytes_per_bot_per_s: f64,
    /// By distance band (nearest first): updates per entity per second,
    /// entities in view and update latency (steady window).
    pub bands: Vec<crate::bands::BandFigure>,
    /// `Degraded` notices the bots received (a budget that could not carry
    /// a view).
    pub degraded_notices: u64,
    /// Every per-bot rate (steady window).
    pub per_bot_per_s: Rates,
    /// Average entities in a bot's view.
    pub in_view_avg: f64,
    /// What the auto world's density implies for `in_view_avg` (`None`
    /// where loadgen cannot tell; see `run::expected_in_view`).
    pub in_view_expected: Option<f64>,
    /// Share of updates matched to a send time (timed).
    pub updates_timed_fraction: f64,
    /// Counts over the whole run.
    pub counters: Counters,
    /// CPU use in the steady window, percent of one core.
    pub cpu_pct: Value,
    /// The load generator's CPU (main and bot threads) per bot-second of
    /// the steady window, µs (`None` without `/proc` or a steady window).
    pub loadgen_cpu_us_per_bot_s: Option<f64>,
    /// `--check-fraction`: the share of bots asked to run every view check.
    pub check_fraction: f64,
    /// `--io`: how the bot threads did their socket I/O.
    pub io: crate::cli::IoKind,
    /// Bots welcomed that ran every view check (the rest skipped other
    /// entities' events; update latency, in-view and bands are theirs).
    pub bots_checked: u64,
    /// `/proc/loadavg` at the start and the end.
    pub load_avg: Value,
    /// The server's own figures (embedded counters or remote `/metrics`).
    pub server: Value,
    /// The hottest shard's tick work p99, one value per steady second.
    pub hottest_shard_tick: ShardTicks,
    /// Thresholds asked for and whether they passed.
    pub thresholds: Value,
    /// The series, one sample per second.
    pub series: Vec<Sample>,
}

/// The hottest shard's tick work, second by second (each shard's p99 over
/// its last metrics window; the hottest of them), against the budget.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ShardTicks {
    /// `runtime.tick_budget_ms` (0 if unknown).
    pub budget_ms: f64,
    /// Steady seconds with a value.
    pub seconds: u64,
    /// Of those, seconds whose hottest shard passed the budget.
    pub seconds_over_budget: u64,
    /// Median, 90th percentile and maximum over the seconds, ms.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p90_ms: f64,
    /// See `p50_ms`.
    pub max_ms: f64,
    /// The same over the last quarter of the steady window.
    pub last_quarter_p50_ms: f64,
    /// See `last_quarter_p50_ms`.
    pub last_quarter_max_ms: f64,
}

impl ShardTicks {
    /// Figures of `per_second` (the hottest shard's p99 each second, ms).
    pub fn of(per_second: &[f64], budget_ms: f64) -> ShardTicks {
        let rank = |v: &[f64], q: f64| -> f64 {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v.get(((v.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        let last = &per_second[per_second.len() - per_second.len() / 4..];
        ShardTicks {
            budget_ms,
            seconds: per_second.len() as u64,
            seconds_over_budget: per_second.iter().filter(|&&t| t > budget_ms).count() as u64,
            p50_ms: rank(per_second, 0.5),
            p90_ms: rank(per_second, 0.9),
            max_ms: rank(per_second, 1.0),
            last_quarter_p50_ms: rank(last, 0.5),
            last_quarter_max_ms: rank(last, 1.0),
        }
    }
}

/// A warning when the bots sent well under the move rate asked for (the
/// bot threads could not keep up, so the run put less load on the server
/// than its settings say), else `None`. The spaces scenario pauses moves
/// on purpose and is not judged.
pub fn move_shortfall(s: &Summary) -> Option<String> {
    let asked = s.settings.get("move_hz")?.as_f64()?;
    let spaces = s.settings.get("scenario").and_then(Value::as_str) == Some("spaces");
    let moved = s.per_bot_per_s.moves;
    (!spaces && s.duration_s > 0.0 && moved < 0.9 * asked).then(|| {
        format!(
            "bots moved {moved:.1} times a second of the {asked:.1} asked: the bot threads \
             could not keep up, so the server saw less load than asked (more --threads, fewer bots)"
        )
    })
}

/// Percentiles of a latency, ms, on one line.
fn pct_text(p: &Percentiles) -> String {
    format!(
        "p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1} ms  ({} samples)",
        p.p50, p.p90, p.p99, p.p999, p.max, p.count
    )
}

/// The migration gap, with the crossings whose gap outlasted the window.
fn migration_gap_text(s: &Summary) -> String {
    format!(
        "{} ({} outlasted the window)",
        pct_text(&s.migration_gap_ms),
        s.migration_gap_overflow
    )
}

/// The summary table.
pub fn summary_table(s: &Summary) -> String {
    let mut out = String::new();
    let mut row = |k: &str, v: String| out.push_str(&format!("  {k:<28} {v}\n"));
    let pct = pct_text;
    row(
        "bots connected",
        format!(
            "{} of {} ({} failed to connect, {} disconnected, {} heard nothing)",
            s.bots_connected,
            s.bots,
            s.counters.connect_failures,
            s.counters.disconnects,
            s.counters.silent
        ),
    );
    row("steady window", format!("{:.0} s", s.duration_s));
    row("update latency", pct(&s.update_latency_ms));
    row("input ack round trip", pct(&s.ack_rtt_ms));
    row("hit round trip", pct(&s.hit_rtt_ms));
    row("own update gap", pct(&s.own_gap_ms));
    row("gap after cell crossing", migration_gap_text(s));
    row(
        "per bot per second",
        format!(
            "{:.1} updates, {:.0} B in, {:.0} B out, {:.1} moves, {:.2} enters, {:.2} leaves, {:.2} detail catch-ups",
            s.per_bot_per_s.updates,
            s.per_bot_per_s.bytes_in,
            s.per_bot_per_s.bytes_out,
            s.per_bot_per_s.moves,
            s.per_bot_per_s.enters,
            s.per_bot_per_s.leaves,
            s.per_bot_per_s.details
        ),
    );
    if let Some(short) = move_shortfall(s) {
        row("NOTE", short);
    }
    let implied = s
        .in_view_expected
        .map_or(String::new(), |e| format!(" (the world implies {e:.1})"));
    row(
        "entities in view (avg)",
        format!("{:.1}{implied}", s.in_view_avg),
    );
    for (label, text) in crate::bands::rows(&s.bands) {
        row(&label, text);
    }
    if s.degraded_notices > 0 {
        row("degraded notices", s.degraded_notices.to_string());
    }
    row(
        "updates timed",
        format!("{:.1} %", 100.0 * s.updates_timed_fraction),
    );
    row(
        "migrations",
        format!(
            "{} ({:.1}/s, {}); client-seen crossings {}",
            s.migrations, s.migrations_per_s, s.migrations_source, s.counters.crossings
        ),
    );
    row(
        "hits",
        format!(
            "{} sent, {} landed, {} expired, {} refused",
            s.counters.hits,
            s.counters.hits_landed,
            s.counters.hits_expired,
            s.counters.hits_refused
        ),
    );
    let t = &s.hottest_shard_tick;
    if t.seconds > 0 {
        row(
            "hottest shard tick p99/s",
            format!(
                "p50 {:.1}  p90 {:.1}  max {:.1} ms; over the {:.0} ms budget {} of {} s; \
                 last quarter p50 {:.1}  max {:.1} ms",
                t.p50_ms,
                t.p90_ms,
                t.max_ms,
                t.budget_ms,
                t.seconds_over_budget,
                t.seconds,
                t.last_quarter_p50_ms,
                t.last_quarter_max_ms
            ),
        );
    }
    if !s.counters.errors.is_empty() {
        row("errors from server", format!("{:?}", s.counters.errors));
    }
    if !s.counters.disconnect_reasons.is_empty() {
        row(
            "session ends",
            format!("{:?}", s.counters.disconnect_reasons),
        );
    }
    row("cpu (% of one core)", s.cpu_pct.to_string());
    if let Some(text) = loadgen_cpu_text(s) {
        row("loadgen CPU per bot", text);
    }
    row("view checks", checks_text(s));
    row("load average", s.load_avg.to_string());
    let kinds: Vec<String> = s
        .counters
        .violation_kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let kinds = if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    };
    row("violations", format!("{}{kinds}", s.violations));
    for v in &s.violation_samples {
        row("  e.g.", v.clone());
    }
    out
}

/// loadgen's CPU per bot-second and the loop that spent it.
fn loadgen_cpu_text(s: &Summary) -> Option<String> {
    let us = s.loadgen_cpu_us_per_bot_s?;
    Some(format!(
        "{us:.1} µs per bot-second ({} loop)",
        io_name(s.io)
    ))
}

/// `--io`'s name for `io`.
pub fn io_name(io: crate::cli::IoKind) -> &'static str {
    match io {
        crate::cli::IoKind::Auto => "auto",
        crate::cli::IoKind::IoUring => "io-uring",
        crate::cli::IoKind::Epoll => "epoll",
    }
}

/// Which bots ran every view check.
pub fn checks_text(s: &Summary) -> String {
    let welcomed = s.counters.connects;
    if s.bots_checked >= welcomed {
        return format!("every bot ({welcomed})");
    }
    format!(
        "{} of {welcomed} bots (--check-fraction {}); update latency, in view and bands from those only",
        s.bots_checked, s.check_fraction
    )
}

/// The first three fields of `/proc/loadavg` (`None` without it).
pub fn load_avg() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record;

    #[test]
    fn steady_seconds_count_bot_seconds_and_rates() {
        let mut c = Collector::default();
        let mut first = Interval::default();
        first.counters.connects = 10;
        first.counters.updates = 1_000;
        c.push_second(1.0, &first, false, ServerSecond::default());
        let mut second = Interval::default();
        second.counters.updates = 500;
        second.counters.bytes_in = 20_000;
        record(&mut second.hists.update_latency, 12_000);
        let s = c.push_second(
            2.0,
            &second,
            true,
            ServerSecond {
                migrations: Some(4),
                shard_tick_p99_ms: vec![12.5, 3.0],
            },
        );
        assert_eq!(
            (s.connected, s.updates_per_s, s.migrations),
            (10, 500, Some(4))
        );
        assert_eq!(s.latency_ms.count, 1);
        assert_eq!(c.steady_s, 1.0);
        assert_eq!(c.steady_bot_s, 10.0);
        assert_eq!(
            c.steady_hottest_tick_ms,
            vec![12.5],
            "the hottest shard, steady seconds only"
        );
        let r = Rates::of(&c.steady.counters, c.steady_bot_s);
        assert_eq!((r.updates, r.bytes_in), (50.0, 2_000.0));
        assert_eq!(c.total.counters.updates, 1_500);
        assert!(live_line(&c.series[1], 10).contains("10/10"));
    }

    #[test]
    fn a_move_rate_shortfall_is_noted_except_for_spaces() {
        let mut s = Summary {
            settings: serde_json::json!({"move_hz": 10.0, "scenario": "random-walk"}),
            duration_s: 20.0,
            ..Summary::default()
        };
        s.per_bot_per_s.moves = 9.5;
        assert_eq!(move_shortfall(&s), None, "within 10 %");
        s.per_bot_per_s.moves = 4.8;
        let note = move_shortfall(&s).expect("noted");
        assert!(note.contains("4.8") && note.contains("10.0"), "{note}");
        assert!(summary_table(&s).contains("NOTE"));
        s.settings = serde_json::json!({"move_hz": 10.0, "scenario": "spaces"});
        assert_eq!(move_shortfall(&s), None, "spaces pauses moves on purpose");
    }

    #[test]
    fn shard_ticks_count_the_seconds_over_budget() {
        let per_s = [10.0, 50.0, 30.0, 45.0, 20.0, 12.0, 11.0, 9.0];
        let t = ShardTicks::of(&per_s, 40.0);
        assert_eq!((t.seconds, t.seconds_over_budget), (8, 2));
        assert_eq!((t.max_ms, t.p50_ms), (50.0, 20.0));
        assert_eq!((t.last_quarter_p50_ms, t.last_quarter_max_ms), (11.0, 11.0));
        assert_eq!(ShardTicks::of(&[], 40.0).seconds, 0);
    }
}
