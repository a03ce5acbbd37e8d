//! The world's own bounds, and the parameters of its cells and proxies,
//! mapped from a tessera config.
//!
//! Owns plain values only.

use crate::config::{ticks_per_update, visit_span, BalancerParams, Config};
use crate::core::cell::{CellParams, ViewParams};
use crate::core::proxy::ProxyParams;
use crate::sim::options::SimOptions;

/// The world's own bounds, and the parameters of its cells and proxies.
#[derive(Clone, Debug, PartialEq)]
pub struct WorldParams {
    /// Parameters of every cell (the world may raise the buffer bounds to
    /// cover the configured stalls, see [`WorldParams::for_options`]).
    pub cell: CellParams,
    /// View parameters of every cell (`[aoi]`, `[view]`: the simulated
    /// clients get the same budgets and bands as the server's).
    pub views: ViewParams,
    /// The clients' update rate (`view.client_update_hz`): `views`' flush
    /// period is worked out on the config's tick, and
    /// [`WorldParams::for_options`] works it out again on the simulated
    /// tick, so a simulated client is sent as often, and given as many
    /// bytes a second, as a server's.
    pub client_update_hz: f64,
    /// Parameters of every proxy.
    pub proxy: ProxyParams,
    /// The balancer of the tree scenarios (`crowd`, `swing`): `[balance]`
    /// as the server takes it ([`crate::config::BalanceConfig::balancer`];
    /// the NPC crowd keys steer the server's NPCs, and the simulator has
    /// none). The grid scenarios run no balancer.
    pub balance: BalancerParams,
    /// Events kept in the trace log for failure reports (the events about
    /// the entity of a violation are picked from it). Default 65 536: the
    /// whole of a small run, the last ten ticks or so of 1,000 entities.
    pub event_log_len_max: usize,
    /// Violations kept per run (more are only counted). Default 16.
    pub violations_max: usize,
    /// Trace events printed with a violation: this many about its entity,
    /// and a quarter as many of the whole world. Default 40.
    pub context_events_max: usize,
}

impl Default for WorldParams {
    fn default() -> Self {
        WorldParams::from_config(&Config::default())
    }
}

impl WorldParams {
    /// The knobs of a tessera config that shape a world (world ghost
    /// radius, `[cell]`, `[sync]`, `[aoi]`, `[view]`, `[balance]`), default
    /// world bounds.
    pub fn from_config(c: &Config) -> Self {
        let cell = c.cell_params();
        WorldParams {
            cell,
            views: c.view_params(),
            client_update_hz: c.view.client_update_hz,
            proxy: ProxyParams::default(),
            balance: c.balance.balancer(),
            event_log_len_max: 65_536,
            violations_max: 16,
            context_events_max: 40,
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
        // The update rate on the simulated clock (whose tick may not be the
        // config's): whole ticks, no more than a ghost's cache spans (as
        // the config's validation holds the server's), and the budgets
        // refill per flush of that period.
        let span = u16::try_from(p.views.ghost_cache_max.max(1)).unwrap_or(u16::MAX);
        let every = ticks_per_update(self.client_update_hz, options.tick_ms).min(span);
        p.views.flush_every_ticks = every;
        p.views.observer.budget.tick_ms =
            u32::try_from(options.tick_ms * u64::from(every)).unwrap_or(u32::MAX);
        if p.views.observer.visit_span_max > 0 {
            // Band-rate visits on: the span in flushes of the new period.
            p.views.observer.visit_span_max = visit_span(p.views.ghost_cache_max, every);
        }
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
        c.balance.policy.split_cell_load_min = 0.9;
        c.balance.report_samples_max = 7;
        let p = WorldParams::from_config(&c);
        assert_eq!(p.balance, c.balance.balancer());
        assert_eq!(p.balance.service.balance.split_cell_load_min, 0.9);
        assert_eq!(p.balance.report_samples_max, 7);
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

    /// A simulated client is sent at the configured rate on the simulated
    /// clock, and its budget refills per flush: as many bytes a second as
    /// the config gives a server's (at 10 Hz on 50 ms ticks the budget once
    /// refilled per tick, half the bytes, and the views of a tight budget
    /// did not converge after healing).
    #[test]
    fn the_update_rate_and_the_budget_hold_on_any_simulated_tick() {
        let c = Config::load(None, &["view.client_update_hz=10.0".into()]).expect("valid");
        let p = WorldParams::from_config(&c);
        for (tick_ms, every) in [(50, 2), (20, 5), (33, 3), (100, 1)] {
            let o = SimOptions {
                tick_ms,
                ..SimOptions::test_min()
            };
            let q = p.for_options(&o);
            assert_eq!(q.views.flush_every_ticks, every, "{tick_ms} ms ticks");
            assert_eq!(
                u64::from(q.views.observer.budget.tick_ms),
                tick_ms * u64::from(every),
                "the budget refills once per flush ({tick_ms} ms ticks)"
            );
            assert_eq!(
                q.views.observer.visit_span_max,
                16 / every,
                "band-rate visits within a ghost cache's span"
            );
        }
        // Never more ticks apart than a ghost's cache spans.
        let slow = Config::load(
            None,
            &[
                "view.client_update_hz=1.25".into(),
                "view.bands=[{to_m=1000.0,min_hz=1.0}]".into(),
            ],
        )
        .expect("valid");
        let o = SimOptions {
            tick_ms: 20,
            ..SimOptions::test_min()
        };
        let q = WorldParams::from_config(&slow).for_options(&o);
        assert_eq!(q.views.flush_every_ticks, 16);
        assert_eq!(q.views.observer.budget.tick_ms, 320);
    }
}
