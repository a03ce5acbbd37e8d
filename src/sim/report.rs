//! What a simulation run reports: its summary, its violations, its replay.
//!
//! [`SimSummary`] serialises to one JSON line (for scripts comparing runs) and
//! displays as a short human summary; summaries of several seeds merge.
//! [`Violation`] names the broken invariant of DESIGN.md ([`ViolationKind`]),
//! where and when; [`replay_command`] prints the command line that replays a
//! run.
//!
//! Owns plain values only; the world fills them in.

use std::fmt;

use crate::core::ids::EntityId;
use crate::sim::options::SimOptions;
use crate::sim::trace::TraceHasher;

/// The invariants the simulator checks (DESIGN.md, "Invariants").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum ViolationKind {
    /// Two cells hold the entity as real at once.
    TwoReals,
    /// No cell holds the entity as real and none is in flight.
    NoReal,
    /// A client input was applied after a later one (a repeat of an older
    /// input counts here too: the checker keeps only the highest applied).
    InputOutOfOrder,
    /// A client input was applied twice in a row.
    InputDuplicated,
    /// An observer got a property delta whose version is not the next one.
    VersionGap,
    /// An observer got an update for an entity before its enter.
    UpdateBeforeEnter,
    /// An observer got an enter for an entity it already sees.
    DoubleEnter,
    /// An observer got an update for an entity after its leave.
    UpdateAfterLeave,
    /// A real migrated to a cell that held no ghost of it.
    MigratedWithoutGhost,
    /// A message to an entity did not reach its real.
    ForwardLost,
    /// After healing, an observer's view differs from the truth.
    ViewDiverged,
    /// A client input was never applied (dropped, skipped by a jump in the
    /// inputs applied, or still missing after healing).
    InputLost,
    /// A call was never run (or ran for another entity).
    CallLost,
    /// A call ran twice.
    CallDuplicated,
    /// A ghost applied a version that is not the next one (or went back).
    GhostOutOfOrder,
    /// A real migrated again without having crossed into another cell since
    /// its last migration (flapping at a border).
    MigrationFlap,
    /// After healing, a ghost differs from its real (state, version, or
    /// where it believes the real is), or is orphaned.
    GhostDiverged,
    /// After healing, a real lacks a ghost in a cell within the ghost radius.
    MissingGhost,
    /// After healing, a proxy does not know where its real is.
    ProxyStale,
    /// After healing, messages are still in flight or buffered.
    NotQuiesced,
    /// A merging cell did not drain, or a retired cell holds a real.
    MergeNotDrained,
    /// A cell dropped a message in a way that loses information.
    HarmfulDrop,
    /// Downstream data reached a client out of order, twice, or not at all.
    DownstreamBroken,
    /// The core panicked (an assertion of a protocol invariant).
    Panic,
}

impl ViolationKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ViolationKind; 24] = [
        ViolationKind::TwoReals,
        ViolationKind::NoReal,
        ViolationKind::InputOutOfOrder,
        ViolationKind::InputDuplicated,
        ViolationKind::VersionGap,
        ViolationKind::UpdateBeforeEnter,
        ViolationKind::DoubleEnter,
        ViolationKind::UpdateAfterLeave,
        ViolationKind::MigratedWithoutGhost,
        ViolationKind::ForwardLost,
        ViolationKind::ViewDiverged,
        ViolationKind::InputLost,
        ViolationKind::CallLost,
        ViolationKind::CallDuplicated,
        ViolationKind::GhostOutOfOrder,
        ViolationKind::MigrationFlap,
        ViolationKind::GhostDiverged,
        ViolationKind::MissingGhost,
        ViolationKind::ProxyStale,
        ViolationKind::NotQuiesced,
        ViolationKind::MergeNotDrained,
        ViolationKind::HarmfulDrop,
        ViolationKind::DownstreamBroken,
        ViolationKind::Panic,
    ];
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One broken invariant, with enough to find and replay it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The run's seed.
    pub seed: u64,
    /// The tick it was detected at.
    pub tick: u64,
    /// Which invariant.
    pub kind: ViolationKind,
    /// The entity concerned, if one is.
    #[serde(serialize_with = "entity_as_u64")]
    pub entity: Option<EntityId>,
    /// What was seen against what was expected.
    pub detail: String,
    /// The lead-up: the entity's residency history in every cell and the
    /// last events of the trace (filled by the world; may be empty).
    pub context: String,
}

fn entity_as_u64<S: serde::Serializer>(e: &Option<EntityId>, s: S) -> Result<S::Ok, S::Error> {
    match e {
        Some(id) => s.serialize_some(&id.0),
        None => s.serialize_none(),
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed {} tick {}: {}", self.seed, self.tick, self.kind)?;
        if let Some(e) = self.entity {
            write!(f, " {e}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// The command line that replays the run `options` describes. Every option
/// is spelled out, so the replay does not depend on how `swarm` draws; the
/// `verify` feature turns on the cells' whole-structure checks and their
/// residency histories (printed with each violation).
pub fn replay_command(options: &SimOptions) -> String {
    let o = options;
    let l = &o.latency;
    format!(
        "cargo run --release --features verify --bin tessera -- sim --seed {} --scenario {} --shards {} \
         --cells {} --entities {} --ticks {} --heal-ticks {} --tick-ms {} --world-side-m {} \
         --bot-speed-mps {} --latency-min-us {} --latency-max-us {} \
         --latency-pair-skew-us-max {} --burst-probability {} --burst-us-max {} \
         --in-flight-per-pair-max {} --stall-probability {} --stall-ms-max {}",
        o.seed,
        o.scenario,
        o.shards,
        o.cells,
        o.entities,
        o.ticks,
        o.heal_ticks,
        o.tick_ms,
        o.world_side_m,
        o.bot_speed_mps,
        l.min_us,
        l.max_us,
        l.pair_skew_us_max,
        l.burst_probability,
        l.burst_us_max,
        o.in_flight_per_pair_max,
        o.stall_probability,
        o.stall_ms_max,
    )
}

/// Totals over one or more runs.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SimSummary {
    /// Runs (seeds) summed up.
    pub seeds: u64,
    /// Seeds whose run broke an invariant.
    pub failed_seeds: Vec<u64>,
    /// Ticks simulated, all runs.
    pub ticks: u64,
    /// Reals that changed cell.
    pub migrations: u64,
    /// Messages forwarded from an old cell to the real's new one.
    pub forwarded: u64,
    /// Times the cell under a real's position changed (border crossings):
    /// with `migrations`, the migrations per crossing a hysteresis buys.
    pub crossings: u64,
    /// Ghosts created (`CreateGhost` sent): the cost side of the ghost
    /// radius and of ghost churn.
    pub ghosts_created: u64,
    /// Sync messages applied by ghosts: the steady cost of holding ghosts.
    pub ghost_syncs_applied: u64,
    /// Bytes in the view batches cells built for their clients.
    pub view_bytes: u64,
    /// Entity versions sent to clients as updates.
    pub view_updates: u64,
    /// Detail property changes cut for clients beyond their reach.
    pub view_detail_cut: u64,
    /// Level-of-detail catch-ups sent to clients.
    pub view_details: u64,
    /// Shown entities the observers' pulls visited.
    pub view_visits: u64,
    /// Of them, the quiet ones passed by unread (their copies' heads held
    /// still since the observer's last pull).
    pub view_quiet: u64,
    /// Load spread: the busiest shard's work over the mean shard's, where a
    /// shard's work is the inputs its cells applied plus the syncs they
    /// built and applied (1.0 = even; largest over runs).
    pub load_spread_max: f64,
    /// Invariant violations.
    pub violations: u64,
    /// Messages the network delivered.
    pub messages_delivered: u64,
    /// Sends refused because a link was full.
    pub messages_rejected_full: u64,
    /// Most messages in flight at once (largest over runs).
    pub max_in_flight: u64,
    /// Longest message delay, microseconds (largest over runs).
    pub max_delay_us: u64,
    /// Largest sync reorder buffer seen (largest over runs).
    pub max_reorder_buffer: u64,
    /// Largest carried delta cache seen (largest over runs).
    pub max_cache_len: u64,
    /// Trace hash: the run's, or a hash over the runs' in merge order.
    pub trace_hash: u64,
    /// Balanced scenarios: splits applied.
    pub splits: u64,
    /// Balanced scenarios: merges finished.
    pub merges: u64,
    /// Balanced scenarios: boundary moves.
    pub rebalances: u64,
    /// Balanced scenarios: boundary moves reversing the previous one.
    pub boundary_reversals: u64,
    /// Balanced scenarios: most reversals of one boundary in a run
    /// (largest over runs).
    pub boundary_reversals_max: u64,
    /// Balanced scenarios: tree changes applied by shards other than the
    /// service's (each shard's replica hears of them over the network).
    pub replica_changes: u64,
    /// Balanced scenarios: messages parked for a cell its shard's replica
    /// did not know yet.
    pub parked_messages: u64,
    /// Balanced scenarios: most versions a replica lagged the service's
    /// when a change reached it.
    pub replica_lag_max: u64,
    /// Balanced scenarios: longest a change took to reach a replica, µs.
    pub replica_lag_us_max: u64,
    /// Balanced scenarios: reals that reached a cell after it finished
    /// merging (and passed through it).
    pub retired_stragglers: u64,
    /// Simulation speed, ticks per wall-clock second (filled by the caller:
    /// the core has no clock).
    pub sim_ticks_per_s: f64,
}

impl SimSummary {
    /// Adds `other` (the next run) into `self`: counts add, maxima take the
    /// larger, trace hashes chain in order, speeds are recomputed by the caller.
    pub fn merge(&mut self, other: &SimSummary) {
        self.seeds += other.seeds;
        self.failed_seeds.extend_from_slice(&other.failed_seeds);
        self.ticks += other.ticks;
        self.migrations += other.migrations;
        self.forwarded += other.forwarded;
        self.crossings += other.crossings;
        self.ghosts_created += other.ghosts_created;
        self.ghost_syncs_applied += other.ghost_syncs_applied;
        self.view_bytes += other.view_bytes;
        self.view_updates += other.view_updates;
        self.view_detail_cut += other.view_detail_cut;
        self.view_details += other.view_details;
        self.view_visits += other.view_visits;
        self.view_quiet += other.view_quiet;
        self.load_spread_max = self.load_spread_max.max(other.load_spread_max);
        self.violations += other.violations;
        self.messages_delivered += other.messages_delivered;
        self.messages_rejected_full += other.messages_rejected_full;
        self.max_in_flight = self.max_in_flight.max(other.max_in_flight);
        self.max_delay_us = self.max_delay_us.max(other.max_delay_us);
        self.max_reorder_buffer = self.max_reorder_buffer.max(other.max_reorder_buffer);
        self.max_cache_len = self.max_cache_len.max(other.max_cache_len);
        self.splits += other.splits;
        self.merges += other.merges;
        self.rebalances += other.rebalances;
        self.boundary_reversals += other.boundary_reversals;
        self.boundary_reversals_max = self
            .boundary_reversals_max
            .max(other.boundary_reversals_max);
        self.replica_changes += other.replica_changes;
        self.parked_messages += other.parked_messages;
        self.replica_lag_max = self.replica_lag_max.max(other.replica_lag_max);
        self.replica_lag_us_max = self.replica_lag_us_max.max(other.replica_lag_us_max);
        self.retired_stragglers += other.retired_stragglers;
        let mut h = TraceHasher::new();
        h.write_u64(self.trace_hash);
        h.write_u64(other.trace_hash);
        self.trace_hash = h.finish();
    }

    /// One JSON object on one line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a summary always serialises")
    }
}

impl fmt::Display for SimSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.violations == 0 { "OK" } else { "FAILED" };
        writeln!(
            f,
            "{verdict}: {} seeds, {} ticks ({:.0} ticks/s), trace {:016x}",
            self.seeds, self.ticks, self.sim_ticks_per_s, self.trace_hash
        )?;
        writeln!(
            f,
            "  migrations {}, forwarded {}, delivered {}, rejected (link full) {}",
            self.migrations, self.forwarded, self.messages_delivered, self.messages_rejected_full
        )?;
        writeln!(
            f,
            "  max in flight {}, max delay {} us, max reorder buffer {}, max cache {}",
            self.max_in_flight, self.max_delay_us, self.max_reorder_buffer, self.max_cache_len
        )?;
        writeln!(
            f,
            "  view: {} updates, {} bytes, {} detail changes cut beyond reach, {} catch-ups",
            self.view_updates, self.view_bytes, self.view_detail_cut, self.view_details
        )?;
        writeln!(
            f,
            "  view: {} slot visits, {} of them quiet (passed by unread)",
            self.view_visits, self.view_quiet
        )?;
        if self.splits + self.merges + self.rebalances > 0 {
            writeln!(
                f,
                "  splits {}, merges {}, rebalances {}, boundary reversals {} (max {} on one)",
                self.splits,
                self.merges,
                self.rebalances,
                self.boundary_reversals,
                self.boundary_reversals_max
            )?;
            writeln!(
                f,
                "  replicas: {} changes applied late (up to {} versions, {} ms behind), {} messages parked, {} stragglers through retired cells",
                self.replica_changes,
                self.replica_lag_max,
                self.replica_lag_us_max / 1000,
                self.parked_messages,
                self.retired_stragglers
            )?;
        }
        write!(f, "  violations {}", self.violations)?;
        if !self.failed_seeds.is_empty() {
            write!(f, " (seeds {:?})", self.failed_seeds)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::options::Scenario;

    #[test]
    fn summary_is_one_json_line_with_every_field() {
        let s = SimSummary {
            seeds: 2,
            failed_seeds: vec![7],
            ticks: 100,
            violations: 1,
            sim_ticks_per_s: 1234.5,
            ..SimSummary::default()
        };
        let line = s.to_json_line();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["seeds"], 2);
        assert_eq!(v["failed_seeds"][0], 7);
        assert_eq!(v["sim_ticks_per_s"], 1234.5);
        for key in [
            "migrations",
            "forwarded",
            "messages_delivered",
            "max_reorder_buffer",
            "view_detail_cut",
            "view_details",
            "view_visits",
            "view_quiet",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        let text = s.to_string();
        assert!(text.starts_with("FAILED: 2 seeds, 100 ticks"), "{text}");
        assert!(text.contains("seeds [7]"));
    }

    #[test]
    fn merge_adds_counts_and_takes_maxima() {
        let a = SimSummary {
            seeds: 1,
            ticks: 10,
            migrations: 3,
            max_delay_us: 50,
            trace_hash: 1,
            ..SimSummary::default()
        };
        let b = SimSummary {
            seeds: 1,
            ticks: 20,
            migrations: 4,
            max_delay_us: 40,
            trace_hash: 2,
            ..SimSummary::default()
        };
        let mut ab = SimSummary::default();
        ab.merge(&a);
        ab.merge(&b);
        assert_eq!(
            (ab.seeds, ab.ticks, ab.migrations, ab.max_delay_us),
            (2, 30, 7, 50)
        );
        let mut ba = SimSummary::default();
        ba.merge(&b);
        ba.merge(&a);
        assert_ne!(
            ab.trace_hash, ba.trace_hash,
            "run order is part of the hash"
        );
    }

    #[test]
    fn violation_displays_and_serialises() {
        let v = Violation {
            seed: 42,
            tick: 17,
            kind: ViolationKind::VersionGap,
            entity: Some(EntityId(5)),
            detail: "got v7 after v5".into(),
            context: String::new(),
        };
        assert_eq!(
            v.to_string(),
            "seed 42 tick 17: VersionGap e5: got v7 after v5"
        );
        let json = serde_json::to_string(&v).expect("serialises");
        assert!(json.contains(r#""kind":"VersionGap""#) && json.contains(r#""entity":5"#));
        assert_eq!(ViolationKind::ALL.len(), 24);
    }

    #[test]
    fn replay_command_names_seed_scenario_and_every_option() {
        let mut o = SimOptions::swarm(99);
        o.scenario = Scenario::BorderWalk;
        let cmd = replay_command(&o);
        assert!(
            cmd.starts_with("cargo run --release --features verify --bin tessera -- sim --seed 99")
        );
        assert!(cmd.contains("--scenario border-walk"));
        assert!(cmd.contains(&format!("--shards {}", o.shards)));
        assert!(cmd.contains(&format!("--latency-max-us {}", o.latency.max_us)));
        assert!(cmd.contains(&format!("--stall-ms-max {}", o.stall_ms_max)));
    }
}
