//! `tuning recommend`: runs the simulator over a small grid of the knobs
//! that matter, one knob at a time (the others at the base config), on the
//! same seeds, and recommends one value per knob by a documented rule.
//!
//! The rule for every knob: a value whose runs broke any invariant (or that
//! does not validate) is out; among the rest, the figure the knob trades
//! decides ([`Rule`]), values within 2 % of the best on it count as equal
//! and go to a second figure, and a tie left after that goes to the value
//! listed first in the grid (the cheaper end: the grids are listed that
//! way). A key the simulator does not read is never in the grid: every grid
//! is checked ([`crate::measure::check_read`]). `[balance]` has no rule
//! yet: its keys are probed and reported as left out, with where to sweep
//! them (the simulator reads them, but only its tree scenarios run a
//! balancer).
//!
//! Owns the grid, the rules and the report; measuring is `measure`'s.

use std::path::PathBuf;

use anyhow::{bail, Context};
use tessera::sim::options::Scenario;

use crate::measure::{check_read, config_with, measure, Figures, MeasureError, Runs};

/// Arguments of `tuning recommend`.
#[derive(clap::Args, Debug)]
pub struct RecommendArgs {
    /// The scenario every seed runs.
    #[arg(long, default_value = "border-walk")]
    pub scenario: Scenario,
    /// Seeds per value (0..N).
    #[arg(long, default_value_t = 4)]
    pub seeds: u64,
    /// Ticks of phase one per seed (the heal phase follows).
    #[arg(long, default_value_t = 300)]
    pub ticks: u64,
    /// A base config file (keys it leaves out keep the embedded defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Overrides of the base, applied before each tried value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Replace one knob's values, e.g. `cell.migrate_margin_m=2,8`
    /// (repeatable; when given, only the knobs named run).
    #[arg(long = "grid", value_name = "KEY=V1,V2,..")]
    pub grid: Vec<String>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// The figure a knob trades, and how the best value is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The fewest ghost syncs applied per 1,000 ticks, then the fewest
    /// ghosts created: the smallest ghost upkeep that still kept every
    /// invariant.
    FewestGhostSyncs,
    /// The fewest migrations per border crossing, then the fewest ghost
    /// syncs per 1,000 ticks: hysteresis against the ghosts it keeps alive.
    FewestMigrationsPerCrossing,
    /// Among values delivering at least 90 % of the most view updates per
    /// client-second of the clean values, the fewest view bytes per
    /// client-second: the cheapest budget that still shows the movement.
    CheapestViewKeepingUpdates,
}

impl Rule {
    /// The rule in words (printed and in the JSON).
    pub fn text(self) -> &'static str {
        match self {
            Rule::FewestGhostSyncs => {
                "zero violations, then the fewest ghost syncs per 1,000 ticks (within 2 % counts as equal), then the fewest ghosts created"
            }
            Rule::FewestMigrationsPerCrossing => {
                "zero violations, then the fewest migrations per crossing (within 2 % counts as equal), then the fewest ghost syncs per 1,000 ticks"
            }
            Rule::CheapestViewKeepingUpdates => {
                "zero violations and at least 90 % of the most view updates per client-second, then the fewest view bytes per client-second"
            }
        }
    }

    fn primary(self, f: &Figures) -> f64 {
        match self {
            Rule::FewestGhostSyncs => f.ghost_syncs_per_kilotick,
            Rule::FewestMigrationsPerCrossing => f.migrations_per_crossing,
            Rule::CheapestViewKeepingUpdates => f.view_bytes_per_client_s,
        }
    }

    fn secondary(self, f: &Figures) -> f64 {
        match self {
            Rule::FewestGhostSyncs => f.ghosts_created_per_kilotick,
            Rule::FewestMigrationsPerCrossing => f.ghost_syncs_per_kilotick,
            Rule::CheapestViewKeepingUpdates => 0.0,
        }
    }

    fn primary_name(self) -> &'static str {
        match self {
            Rule::FewestGhostSyncs => "ghost syncs per 1,000 ticks",
            Rule::FewestMigrationsPerCrossing => "migrations per crossing",
            Rule::CheapestViewKeepingUpdates => "view bytes per client-second",
        }
    }
}

/// Values within this fraction of the best primary figure count as equal.
pub const TIE_FRACTION: f64 = 0.02;
/// A primary figure that varies less than this over the clean values marks
/// the recommendation as weak (said in its `because`).
pub const FLAT_FRACTION: f64 = 0.10;
/// [`Rule::CheapestViewKeepingUpdates`]: the share of the most updates a
/// value must deliver.
pub const UPDATES_KEPT_MIN: f64 = 0.9;

/// One knob of the grid.
#[derive(Clone, Debug)]
pub struct Knob {
    /// The dotted config key.
    pub key: &'static str,
    /// The values tried, the cheaper end first.
    pub values: Vec<String>,
    /// How the best is chosen.
    pub rule: Rule,
    /// What the knob trades, in words.
    pub trades: &'static str,
}

/// The knobs `recommend` tunes by default (each one read by the simulator:
/// `sim::world_params` maps `[world] ghost_radius_m`, `[cell]` and `[view]`
/// into every simulated cell and client).
pub fn default_knobs() -> Vec<Knob> {
    let v = |xs: &[&str]| xs.iter().map(|s| (*s).to_owned()).collect();
    vec![
        Knob {
            key: "world.ghost_radius_m",
            values: v(&["56", "60", "72", "90"]),
            rule: Rule::FewestGhostSyncs,
            trades: "ghost upkeep (every real within the radius of a border is copied and synced there) against slack: it must cover the AOI leave radius plus the migrate margin",
        },
        Knob {
            key: "cell.migrate_margin_m",
            values: v(&["2", "4", "8", "12"]),
            rule: Rule::FewestMigrationsPerCrossing,
            trades: "migrations of reals that walk back and forth across a border against reals held farther outside their cell (more ghosts, forwards)",
        },
        Knob {
            key: "view.client_bytes_per_s_max",
            values: v(&["1200", "2500", "5000", "0"]),
            rule: Rule::CheapestViewKeepingUpdates,
            trades: "bytes sent to each client against the movement updates it sees (0 = no budget)",
        },
    ]
}

/// Config keys probed to say what is not in the grid and why.
const PROBES: [(&str, [&str; 2]); 2] = [
    ("balance.split_cell_load_min", ["0.3", "0.9"]),
    ("balance.rebalance_load_diff_min", ["0.05", "0.3"]),
];

/// One value tried.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Trial {
    /// The value as given.
    pub value: String,
    /// Why it was not run (it does not validate with the base config).
    pub refused: Option<String>,
    /// What its runs measured.
    pub figures: Option<Figures>,
}

impl Trial {
    fn clean(&self) -> Option<&Figures> {
        self.figures.as_ref().filter(|f| f.violations == 0)
    }
}

/// One knob's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KnobResult {
    /// The key.
    pub key: String,
    /// The rule, by name.
    pub rule: Rule,
    /// The rule in words.
    pub rule_text: &'static str,
    /// What the knob trades.
    pub trades: &'static str,
    /// Every value tried, in grid order.
    pub trials: Vec<Trial>,
    /// The recommended value (none if no value kept every invariant).
    pub recommended: Option<String>,
    /// Why, with the figures.
    pub because: String,
}

/// A key probed and left out of the grid.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LeftOut {
    /// The key.
    pub key: &'static str,
    /// Whether the simulator reads it (two values gave different parameters).
    pub read_by_simulator: bool,
    /// Why it is not in the grid.
    pub why: String,
}

/// What `recommend` prints.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Recommendation {
    /// The scenario.
    pub scenario: Scenario,
    /// Seeds per value.
    pub seeds: u64,
    /// Phase-one ticks per seed.
    pub ticks: u64,
    /// One entry per knob.
    pub knobs: Vec<KnobResult>,
    /// Keys probed and not in the grid.
    pub left_out: Vec<LeftOut>,
}

/// Picks the value `rule` recommends among `trials` (by index), and says
/// why.
pub fn choose(rule: Rule, trials: &[Trial]) -> (Option<usize>, String) {
    let clean: Vec<(usize, &Figures)> = trials
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.clean().map(|f| (i, f)))
        .collect();
    if clean.is_empty() {
        return (None, "no value kept every invariant".into());
    }
    let mut pool = clean.clone();
    let mut kept_note = String::new();
    if rule == Rule::CheapestViewKeepingUpdates {
        let most = clean
            .iter()
            .map(|(_, f)| f.view_updates_per_client_s)
            .fold(0.0_f64, f64::max);
        pool.retain(|(_, f)| f.view_updates_per_client_s >= UPDATES_KEPT_MIN * most);
        kept_note = format!(
            ", {} of {} clean values keep >= 90 % of the most updates ({most:.1} per client-second)",
            pool.len(),
            clean.len()
        );
    }
    let best = pool
        .iter()
        .map(|(_, f)| rule.primary(f))
        .fold(f64::INFINITY, f64::min);
    let near: Vec<(usize, &Figures)> = pool
        .into_iter()
        .filter(|(_, f)| rule.primary(f) <= best * (1.0 + TIE_FRACTION) + 1e-12)
        .collect();
    let Some(&(pick, f)) = near.iter().min_by(|a, b| {
        rule.secondary(a.1)
            .total_cmp(&rule.secondary(b.1))
            .then(a.0.cmp(&b.0))
    }) else {
        return (None, "no value kept every invariant".into());
    };
    let because = format!(
        "0 violations; {:.3} {} (best {best:.3} among {} clean of {} values{kept_note}; {} within 2 %); ghost syncs {:.1}/1kt, migrations per crossing {:.3}, load spread {:.2}, view {:.0} B/client/s",
        rule.primary(f),
        rule.primary_name(),
        clean.len(),
        trials.len(),
        near.len(),
        f.ghost_syncs_per_kilotick,
        f.migrations_per_crossing,
        f.load_spread_mean,
        f.view_bytes_per_client_s,
    );
    let worst = clean
        .iter()
        .map(|(_, f)| rule.primary(f))
        .fold(0.0_f64, f64::max);
    let all_best = clean
        .iter()
        .map(|(_, f)| rule.primary(f))
        .fold(f64::INFINITY, f64::min);
    let varies = if all_best > 0.0 {
        worst / all_best - 1.0
    } else {
        f64::INFINITY
    };
    let because = if clean.len() > 1 && varies < FLAT_FRACTION {
        format!(
            "{because}; weak: {} varies by only {:.1} % over the clean values, so the scenario hardly tells them apart",
            rule.primary_name(),
            varies * 100.0
        )
    } else {
        because
    };
    (Some(pick), because)
}

fn knobs_of(args: &RecommendArgs) -> anyhow::Result<Vec<Knob>> {
    let defaults = default_knobs();
    if args.grid.is_empty() {
        return Ok(defaults);
    }
    let mut out = Vec::new();
    for g in &args.grid {
        let (key, values) = g
            .split_once('=')
            .with_context(|| format!("--grid {g}: expected KEY=V1,V2,.."))?;
        let Some(knob) = defaults.iter().find(|k| k.key == key) else {
            let known: Vec<&str> = defaults.iter().map(|k| k.key).collect();
            bail!("--grid {key}: not a knob recommend has a rule for (one of {known:?}); use `tuning sweep` for other keys");
        };
        let values: Vec<String> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        if values.is_empty() {
            bail!("--grid {key}: no values");
        }
        out.push(Knob {
            values,
            ..knob.clone()
        });
    }
    Ok(out)
}

fn run_knob(args: &RecommendArgs, runs: &Runs, knob: &Knob) -> anyhow::Result<KnobResult> {
    // A value that does not validate with the base config is shown as
    // refused (with the rule it breaks), not run.
    let mut configs = Vec::new();
    for value in &knob.values {
        match config_with(args.config.as_deref(), &args.overrides, knob.key, value) {
            Ok(c) => configs.push((value, Ok(c))),
            Err(MeasureError::Config { source, .. }) => {
                configs.push((value, Err(source.to_string())));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let valid: Vec<_> = configs
        .iter()
        .filter_map(|(_, c)| c.as_ref().ok())
        .collect();
    check_read(knob.key, &valid)?;
    let mut trials = Vec::new();
    for (value, config) in configs {
        trials.push(match config {
            Ok(c) => Trial {
                value: value.clone(),
                refused: None,
                figures: Some(measure(&c, runs)?.figures),
            },
            Err(reason) => Trial {
                value: value.clone(),
                refused: Some(reason),
                figures: None,
            },
        });
    }
    let (pick, because) = choose(knob.rule, &trials);
    Ok(KnobResult {
        key: knob.key.to_owned(),
        rule: knob.rule,
        rule_text: knob.rule.text(),
        trades: knob.trades,
        recommended: pick.map(|i| trials[i].value.clone()),
        because,
        trials,
    })
}

fn probe_left_out(args: &RecommendArgs) -> anyhow::Result<Vec<LeftOut>> {
    let mut out = Vec::new();
    for (key, values) in PROBES {
        let configs = values
            .iter()
            .map(|v| config_with(args.config.as_deref(), &args.overrides, key, v))
            .collect::<Result<Vec<_>, _>>()?;
        let read = check_read(key, &configs.iter().collect::<Vec<_>>()).is_ok();
        let why = match (read, args.scenario.is_balanced()) {
            (true, true) => format!(
                "the simulator reads {key} ({} and {} differ), but recommend has no rule for it yet: use `tuning sweep --key {key} --scenario {}`",
                values[0], values[1], args.scenario
            ),
            (true, false) => format!(
                "the simulator reads {key} ({} and {} differ), but {} runs on the fixed grid, where no balancer runs, and recommend has no rule for it yet: use `tuning sweep --key {key} --scenario crowd` (or swing)",
                values[0], values[1], args.scenario
            ),
            (false, _) => format!(
                "the simulator does not read it ({key} = {} and {} give it the same parameters)",
                values[0], values[1]
            ),
        };
        out.push(LeftOut {
            key,
            read_by_simulator: read,
            why,
        });
    }
    Ok(out)
}

/// Runs the grid.
///
/// # Errors
/// Bad arguments, a knob the simulator does not read, a world that cannot
/// be built.
pub fn recommend(args: &RecommendArgs) -> anyhow::Result<Recommendation> {
    if args.seeds == 0 || args.ticks == 0 {
        bail!("--seeds and --ticks must be at least 1");
    }
    let runs = Runs {
        seeds: args.seeds,
        scenario: Some(args.scenario),
        ticks: Some(args.ticks),
    };
    let knobs = knobs_of(args)?;
    let left_out = probe_left_out(args)?;
    let mut results = Vec::new();
    for knob in &knobs {
        let r = run_knob(args, &runs, knob).with_context(|| knob.key.to_owned())?;
        if !args.json {
            print_knob(&r);
        }
        results.push(r);
    }
    Ok(Recommendation {
        scenario: args.scenario,
        seeds: args.seeds,
        ticks: args.ticks,
        knobs: results,
        left_out,
    })
}

fn print_knob(r: &KnobResult) {
    println!("{}: trades {}", r.key, r.trades);
    println!("  rule: {}", r.rule_text);
    println!(
        "  {:>2} {:>8} {:>5} {:>10} {:>9} {:>8} {:>10} {:>10} {:>7} {:>10} {:>9}",
        "",
        "value",
        "viol",
        "migr/cross",
        "migr/1kt",
        "fwd/1kt",
        "ghosts/1kt",
        "gsync/1kt",
        "spread",
        "viewB/cl/s",
        "upd/cl/s"
    );
    for t in &r.trials {
        let mark = if r.recommended.as_deref() == Some(t.value.as_str()) {
            "->"
        } else {
            ""
        };
        match (&t.figures, &t.refused) {
            (Some(f), _) => println!(
                "  {mark:>2} {:>8} {:>5} {:>10.3} {:>9.1} {:>8.1} {:>10.1} {:>10.1} {:>7.2} {:>10.1} {:>9.2}",
                t.value,
                f.violations,
                f.migrations_per_crossing,
                f.migrations_per_kilotick,
                f.forwarded_per_kilotick,
                f.ghosts_created_per_kilotick,
                f.ghost_syncs_per_kilotick,
                f.load_spread_mean,
                f.view_bytes_per_client_s,
                f.view_updates_per_client_s,
            ),
            (None, reason) => println!(
                "  {mark:>2} {:>8} refused: {}",
                t.value,
                reason.as_deref().unwrap_or("not run")
            ),
        }
    }
    match &r.recommended {
        Some(v) => println!("  recommended {} = {v}: {}\n", r.key, r.because),
        None => println!("  no recommendation for {}: {}\n", r.key, r.because),
    }
}

/// Prints the header (before the runs) of the table output.
pub fn print_header(args: &RecommendArgs) {
    println!(
        "tuning recommend: scenario {}, {} seeds per value, {} ticks each (+ heal), one knob at a time around the base config\n",
        args.scenario, args.seeds, args.ticks
    );
}

/// Prints the footer (after the runs) of the table output.
pub fn print_footer(rec: &Recommendation) {
    for l in &rec.left_out {
        println!("not in the grid: {}: {}", l.key, l.why);
    }
    let picks: Vec<String> = rec
        .knobs
        .iter()
        .map(|k| match &k.recommended {
            Some(v) => format!("--set {}={v}", k.key),
            None => format!("({}: none)", k.key),
        })
        .collect();
    println!("\nrecommended: {}", picks.join(" "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::check_scenario;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RecommendArgs,
    }

    fn args(extra: &[&str]) -> RecommendArgs {
        let mut argv = vec!["recommend"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).expect("valid arguments").args
    }

    fn figures(t: &Trial) -> &Figures {
        t.figures.as_ref().expect("run")
    }

    /// A tiny grid on border-walk: the recommendation is the value the
    /// printed figures justify by the documented rule, recomputed here from
    /// the figures alone, and the knobs did change the figures.
    #[test]
    fn the_recommendation_follows_from_its_figures() {
        let a = args(&[
            "--scenario",
            "border-walk",
            "--seeds",
            "2",
            "--ticks",
            "100",
            "--grid",
            "cell.migrate_margin_m=2,8",
            "--grid",
            "view.client_bytes_per_s_max=600,0",
            "--json",
        ]);
        let rec = recommend(&a).expect("runs");
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&rec).expect("serialises")).expect("JSON");
        assert_eq!(json["scenario"], "border-walk");
        assert_eq!(rec.knobs.len(), 2);
        for k in &rec.knobs {
            let clean: Vec<&Trial> = k
                .trials
                .iter()
                .filter(|t| figures(t).violations == 0)
                .collect();
            assert_eq!(clean.len(), 2, "{}: every value ran clean: {k:?}", k.key);
            let v = k.recommended.as_deref().expect("a recommendation");
            let pick = figures(
                k.trials
                    .iter()
                    .find(|t| t.value == v)
                    .expect("one of the grid"),
            );
            assert_eq!(pick.violations, 0);
            match k.rule {
                Rule::FewestMigrationsPerCrossing => {
                    let (a, b) = (figures(clean[0]), figures(clean[1]));
                    assert_ne!(
                        (a.migrations_per_crossing, a.ghost_syncs_per_kilotick),
                        (b.migrations_per_crossing, b.ghost_syncs_per_kilotick),
                        "the margin changed nothing"
                    );
                    let best = clean
                        .iter()
                        .map(|t| figures(t).migrations_per_crossing)
                        .fold(f64::INFINITY, f64::min);
                    assert!(pick.migrations_per_crossing <= best * 1.02 + 1e-12);
                    for t in &clean {
                        let f = figures(t);
                        if f.migrations_per_crossing <= best * 1.02 + 1e-12 {
                            assert!(pick.ghost_syncs_per_kilotick <= f.ghost_syncs_per_kilotick);
                        }
                    }
                }
                Rule::CheapestViewKeepingUpdates => {
                    let most = clean
                        .iter()
                        .map(|t| figures(t).view_updates_per_client_s)
                        .fold(0.0, f64::max);
                    assert!(pick.view_updates_per_client_s >= 0.9 * most);
                    for t in &clean {
                        let f = figures(t);
                        if f.view_updates_per_client_s >= 0.9 * most {
                            assert!(
                                pick.view_bytes_per_client_s
                                    <= f.view_bytes_per_client_s * 1.02 + 1e-12,
                                "{k:?}"
                            );
                        }
                    }
                    let (a, b) = (figures(clean[0]), figures(clean[1]));
                    assert!(
                        a.view_bytes_per_client_s < b.view_bytes_per_client_s,
                        "a 300 B/s budget sends fewer bytes than none: {a:?} {b:?}"
                    );
                }
                Rule::FewestGhostSyncs => unreachable!("not in this grid"),
            }
            assert!(k.because.starts_with("0 violations"), "{}", k.because);
        }
        // The simulator honours `[balance]` (as the server does), but
        // border-walk has no balancer: the probes say so and point to sweep.
        assert!(!rec.left_out.is_empty());
        for l in &rec.left_out {
            assert!(l.read_by_simulator, "{l:?}");
            assert!(l.why.contains("fixed grid"), "{}", l.why);
            assert!(l.why.contains("--scenario crowd"), "{}", l.why);
        }
    }

    /// A knob the simulator ignores cannot be swept or recommended (the NPC
    /// crowd keys steer the server's NPCs; the simulator has none), a
    /// `[balance]` knob needs a scenario with a balancer, and `--grid` takes
    /// only knobs with a rule.
    #[test]
    fn keys_the_simulator_ignores_are_refused() {
        let c = |v: &str| config_with(None, &[], "balance.npc_crowd_radius_m", v).expect("valid");
        let (a, b) = (c("0"), c("50"));
        assert!(matches!(
            check_read("balance.npc_crowd_radius_m", &[&a, &b]),
            Err(MeasureError::NotRead(_))
        ));
        let s = |v: &str| config_with(None, &[], "balance.split_cell_load_min", v).expect("valid");
        let (a, b) = (s("0.3"), s("0.9"));
        check_read("balance.split_cell_load_min", &[&a, &b]).expect("read since [balance] is");
        let runs = |scenario| Runs {
            seeds: 1,
            scenario,
            ticks: None,
        };
        for grid in [None, Some(Scenario::Hotspot), Some(Scenario::BorderWalk)] {
            let err = check_scenario("balance.split_cell_load_min", &runs(grid))
                .expect_err("no balancer on the grid");
            assert!(err.to_string().contains("--scenario crowd"), "{err}");
        }
        check_scenario("balance.split_cell_load_min", &runs(Some(Scenario::Crowd)))
            .expect("crowd balances");
        check_scenario("cell.migrate_margin_m", &runs(None)).expect("not a balance key");
        let m = |v: &str| config_with(None, &[], "cell.migrate_margin_m", v).expect("valid");
        let (a, b) = (m("2"), m("8"));
        check_read("cell.migrate_margin_m", &[&a, &b]).expect("read");
        let err = recommend(&args(&["--grid", "balance.split_cell_load_min=0.3,0.9"]))
            .expect_err("no rule for it");
        assert!(
            err.to_string().contains("balance.split_cell_load_min"),
            "{err}"
        );
    }

    /// Synthetic figures: a violation disqualifies whatever its figures,
    /// and a 2 % tie goes to the second figure.
    #[test]
    fn violations_disqualify_and_ties_go_to_the_second_figure() {
        let t = |value: &str, violations, mpc, syncs| Trial {
            value: value.into(),
            refused: None,
            figures: Some(Figures {
                violations,
                migrations_per_crossing: mpc,
                ghost_syncs_per_kilotick: syncs,
                ..Figures::default()
            }),
        };
        let trials = [
            t("2", 3, 0.5, 10.0),
            t("4", 0, 1.0, 50.0),
            t("8", 0, 0.99, 40.0),
            t("12", 0, 0.985, 45.0),
        ];
        let (pick, why) = choose(Rule::FewestMigrationsPerCrossing, &trials);
        assert_eq!(pick, Some(2), "{why}");
        let none = [t("2", 1, 0.5, 1.0)];
        assert_eq!(choose(Rule::FewestMigrationsPerCrossing, &none).0, None);
    }
}
