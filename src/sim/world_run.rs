//! Running worlds: one seed ([`run_one`]), turning a panic of the core into a
//! violation with its seed, or many ([`run_swarm`]).
//!
//! Owns no state; the caller measures wall-clock speed (the simulator has
//! no clock).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sim::options::SimOptions;
use crate::sim::report::{SimSummary, Violation, ViolationKind};
use crate::sim::world::{World, WorldError, WorldParams, WorldStats};

/// What one run produced.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The options it ran (replay them with `report::replay_command`).
    pub options: SimOptions,
    /// Its counts.
    pub summary: SimSummary,
    /// The violations kept (with context).
    pub violations: Vec<Violation>,
    /// The world's own counts (zero after a panic).
    pub stats: WorldStats,
}

impl RunOutcome {
    /// True if no invariant broke.
    pub fn passed(&self) -> bool {
        self.summary.violations == 0
    }
}

/// Runs the world `options` describe to the end. A panic inside the core
/// (an assertion of a protocol invariant) becomes a [`ViolationKind::Panic`]
/// violation of this seed rather than unwinding into the caller.
///
/// # Errors
/// If the world cannot be built (invalid options or parameters).
pub fn run_one(options: &SimOptions, params: &WorldParams) -> Result<RunOutcome, WorldError> {
    run_one_with(options, params, |_| {})
}

/// [`run_one`], calling `fault` with the world before every step: tests
/// inject a fault there (`world_faults.rs`, [`World::inject`]) and see what
/// the run reports, a panic of the core included. `run_one` passes a hook
/// that does nothing.
///
/// # Errors
/// If the world cannot be built (invalid options or parameters).
pub fn run_one_with(
    options: &SimOptions,
    params: &WorldParams,
    mut fault: impl FnMut(&mut World),
) -> Result<RunOutcome, WorldError> {
    let mut world = World::new(options, params)?;
    let tick = std::cell::Cell::new(0u64);
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let total = options.ticks + options.heal_ticks;
        while world.tick() < total && world.checker().total() == 0 {
            tick.set(world.tick());
            fault(&mut world);
            world.step();
        }
        world.finish()
    }));
    Ok(match ran {
        Ok(summary) => RunOutcome {
            options: options.clone(),
            violations: world.checker().violations().to_vec(),
            stats: world.stats(),
            summary,
        },
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            let violation = Violation {
                seed: options.seed,
                tick: tick.get(),
                kind: ViolationKind::Panic,
                entity: None,
                detail: msg,
                context: String::new(),
            };
            let summary = SimSummary {
                seeds: 1,
                failed_seeds: vec![options.seed],
                ticks: tick.get(),
                violations: 1,
                ..SimSummary::default()
            };
            RunOutcome {
                options: options.clone(),
                summary,
                violations: vec![violation],
                stats: WorldStats::default(),
            }
        }
    })
}

/// Runs every options in `runs` and merges their summaries in order;
/// returns the merged summary and the failed outcomes.
///
/// # Errors
/// The first world that cannot be built.
pub fn run_swarm(
    runs: impl IntoIterator<Item = SimOptions>,
    params: &WorldParams,
) -> Result<(SimSummary, Vec<RunOutcome>), WorldError> {
    let mut total = SimSummary::default();
    let mut failed = Vec::new();
    for o in runs {
        let out = run_one(&o, params)?;
        total.merge(&out.summary);
        if !out.passed() {
            failed.push(out);
        }
    }
    Ok((total, failed))
}
