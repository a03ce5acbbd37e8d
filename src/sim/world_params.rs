//! The world's own bounds, and the parameters of its cells and proxies,
//! mapped from a tessera config.
//!
//! Owns plain values only.

use crate::config::Config;
use crate::core::cell::CellParams;
use crate::core::proxy::ProxyParams;
use crate::sim::options::SimOptions;

/// The world's own bounds, and the parameters of its cells and proxies.
#[derive(Clone, Debug, PartialEq)]
pub struct WorldParams {
    /// Parameters of every cell (the world may raise the buffer bounds to
    /// cover the configured stalls, see [`WorldParams::for_options`]).
    pub cell: CellParams,
    /// Parameters of every proxy.
    pub proxy: ProxyParams,
    /// Events kept in the trace log for failure reports. Default 4096.
    pub event_log_len_max: usize,
    /// Violations kept per run (more are only counted). Default 16.
    pub violations_max: usize,
    /// Trace events (of the whole world) printed with a violation.
    /// Default 12.
    pub context_events_max: usize,
    /// Recent events kept per entity, printed with a violation about it.
    /// Default 32; reduced so that all entities together keep at most
    /// [`ENTITY_LOG_EVENTS_MAX`].
    pub entity_log_len_max: usize,
}

/// Most events kept in all per-entity logs together (memory bound).
pub const ENTITY_LOG_EVENTS_MAX: usize = 4_000_000;

impl Default for WorldParams {
    fn default() -> Self {
        WorldParams::from_config(&Config::default())
    }
}

impl WorldParams {
    /// The cell knobs of a tessera config (world ghost radius, `[cell]`,
    /// `[sync]`), default world bounds.
    pub fn from_config(c: &Config) -> Self {
        let cell = c.cell_params();
        WorldParams {
            cell,
            proxy: ProxyParams::default(),
            event_log_len_max: 4_096,
            violations_max: 16,
            context_events_max: 12,
            entity_log_len_max: 32,
        }
    }

    /// These parameters with the buffers that absorb a stall raised to cover
    /// the longest stall and burst `options` can draw: a stalled shard's
    /// proxy-bound traffic arrives in one lump afterwards, and losing inputs
    /// to a bound the operator sized for shorter stalls is not a protocol bug.
    pub fn for_options(&self, options: &SimOptions) -> WorldParams {
        let l = &options.latency;
        let worst_ms = options.stall_ms_max
            + (l.burst_us_max + l.max_us + l.pair_skew_us_max) / 1_000
            + 4 * options.tick_ms;
        let lump = (2 * worst_ms / options.tick_ms.max(1)) as usize + 16;
        let mut p = self.clone();
        p.cell.input_buffer_max = p.cell.input_buffer_max.max(lump);
        p.cell.pending_calls_max = p.cell.pending_calls_max.max(lump);
        p.proxy.downstream_buffer_max = p.proxy.downstream_buffer_max.max(lump);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_knobs_reach_the_cells_and_stalls_raise_buffers() {
        let mut c = Config::default();
        c.world.ghost_radius_m = 77.0;
        c.cell.migrate_margin_m = 9.0;
        c.sync.reorder_buffer_max = 33;
        let p = WorldParams::from_config(&c);
        assert_eq!(p.cell.ghost_radius_m, 77.0);
        assert_eq!(p.cell.migrate_margin_m, 9.0);
        assert_eq!(p.cell.reorder_buffer_max, 33);
        p.cell.validate().expect("valid");
        let o = SimOptions {
            stall_ms_max: 5_000,
            tick_ms: 20,
            ..SimOptions::test_min()
        };
        let q = p.for_options(&o);
        assert!(
            q.cell.input_buffer_max >= 500,
            "{}",
            q.cell.input_buffer_max
        );
        assert_eq!(q.cell.ghost_radius_m, p.cell.ghost_radius_m);
    }
}
