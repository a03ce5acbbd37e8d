//! Every bound and period of the cell state machine, with documented defaults.
//!
//! Owns [`CellParams`] and its validation. Must not hold any state: the
//! values are read by the cell on every check and never change while it runs.

use std::time::Duration;

use crate::core::entity::{ReorderParams, SyncCacheParams};

/// Why a [`CellParams`] was refused; names the offending key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CellParamsError {
    /// A value is out of its allowed range.
    #[error("cell parameter `{key}` is invalid: {reason}")]
    Invalid {
        /// The parameter's name, as in the config file.
        key: &'static str,
        /// What rule it broke.
        reason: &'static str,
    },
}

/// Bounds and periods of one cell. All cells of a space use the same values.
#[derive(Clone, Debug, PartialEq)]
pub struct CellParams {
    /// A real keeps a ghost in every cell whose rect, inflated by this, covers
    /// the real. Default 50 m.
    pub ghost_radius_m: f64,
    /// Hysteresis on ghost deletion: a ghost is deleted only once the real is
    /// outside the haunt's rect inflated by `ghost_radius_m` plus this.
    /// Default 10 m.
    pub ghost_keep_margin_m: f64,
    /// Hysteresis on migration: a real migrates once it is outside its own
    /// cell's rect inflated by this. Must be below `ghost_radius_m` so the old
    /// cell keeps a ghost after the real left. Default 10 m.
    pub migrate_margin_m: f64,
    /// Ghost upkeep, gap and migration checks run every this many ms.
    /// Default 200 ms.
    pub check_period_ms: u64,
    /// Per check and per cell, at most this many ghosts are created. Default 64.
    pub ghosts_created_per_check_max: u32,
    /// Per check and per cell, at most this many ghosts are deleted. Default 64.
    pub ghosts_deleted_per_check_max: u32,
    /// A ghost younger than this is never deleted. Default 2000 ms.
    pub ghost_min_lifetime_ms: u64,
    /// A real that arrived less than this ago deletes none of its ghosts
    /// (BigWorld's new-real keep period). Default 2000 ms.
    pub new_real_keep_ghosts_ms: u64,
    /// A ghost creation not acknowledged within this is abandoned (a delete is
    /// sent) and retried at a later check. Default 10 000 ms.
    pub ghost_create_timeout_ms: u64,
    /// Per check and per cell, at most this many reals migrate out. Default 32.
    pub migrations_per_check_max: u32,
    /// Forwarding entries kept for entities that left this cell. Default 4096.
    pub forward_table_max: usize,
    /// How long a forwarding entry (and a deleted ghost's tombstone) lives.
    /// Default 30 000 ms.
    pub forward_ttl_ms: u64,
    /// A real-bound message forwarded more than this many times is dropped.
    /// Default 8.
    pub forward_hops_max: u8,
    /// Client inputs buffered at a real ahead of the next expected sequence.
    /// Default 64.
    pub input_buffer_max: usize,
    /// Cross-entity calls queued at a real between two ticks. Default 256.
    pub pending_calls_max: usize,
    /// Sync messages a ghost buffers ahead of a version gap. Default 64.
    pub reorder_buffer_max: usize,
    /// A ghost waits this long for a version gap to fill before asking the
    /// real for a resync. Default 500 ms.
    pub resync_gap_timeout_ms: u64,
    /// Interval between repeated resync requests of one ghost. Default 1000 ms.
    pub resync_retry_ms: u64,
    /// Recent sync messages a real keeps (and carries on migration) to catch
    /// up ghosts. Default 64.
    pub sync_cache_max: usize,
    /// Payload bytes the sync cache keeps. Default 64 KiB.
    pub sync_cache_bytes_max: usize,
    /// Cached sync messages older than this are dropped. Default 3000 ms.
    pub sync_cache_age_max_ms: u64,
    /// Catch-ups (acks of inherited ghosts, resync requests) queued until the
    /// next tick. Default 1024.
    pub catch_up_queue_max: usize,
    /// Real-bound messages held for entities this cell has not heard of yet
    /// (a forward that overtook the entity's `CreateGhost`), each for at
    /// most `ghost_create_timeout_ms`. Default 1024.
    pub early_msgs_max: usize,
}

impl Default for CellParams {
    fn default() -> Self {
        CellParams {
            ghost_radius_m: 50.0,
            ghost_keep_margin_m: 10.0,
            migrate_margin_m: 10.0,
            check_period_ms: 200,
            ghosts_created_per_check_max: 64,
            ghosts_deleted_per_check_max: 64,
            ghost_min_lifetime_ms: 2_000,
            new_real_keep_ghosts_ms: 2_000,
            ghost_create_timeout_ms: 10_000,
            migrations_per_check_max: 32,
            forward_table_max: 4_096,
            forward_ttl_ms: 30_000,
            forward_hops_max: 8,
            input_buffer_max: 64,
            pending_calls_max: 256,
            reorder_buffer_max: 64,
            resync_gap_timeout_ms: 500,
            resync_retry_ms: 1_000,
            sync_cache_max: 64,
            sync_cache_bytes_max: 64 * 1024,
            sync_cache_age_max_ms: 3_000,
            catch_up_queue_max: 1_024,
            early_msgs_max: 1_024,
        }
    }
}

fn invalid(key: &'static str, reason: &'static str) -> CellParamsError {
    CellParamsError::Invalid { key, reason }
}

impl CellParams {
    /// Checks every value and the relations between them.
    ///
    /// # Errors
    /// [`CellParamsError::Invalid`] naming the first bad key.
    pub fn validate(&self) -> Result<(), CellParamsError> {
        if !(self.ghost_radius_m.is_finite() && self.ghost_radius_m > 0.0) {
            return Err(invalid("ghost_radius_m", "must be finite and > 0"));
        }
        if !(self.ghost_keep_margin_m.is_finite() && self.ghost_keep_margin_m >= 0.0) {
            return Err(invalid("ghost_keep_margin_m", "must be finite and >= 0"));
        }
        if !(self.migrate_margin_m.is_finite() && self.migrate_margin_m >= 0.0) {
            return Err(invalid("migrate_margin_m", "must be finite and >= 0"));
        }
        if self.migrate_margin_m >= self.ghost_radius_m {
            return Err(invalid("migrate_margin_m", "must be < ghost_radius_m"));
        }
        let positive = [
            ("check_period_ms", self.check_period_ms),
            ("ghost_create_timeout_ms", self.ghost_create_timeout_ms),
            ("forward_ttl_ms", self.forward_ttl_ms),
            ("resync_gap_timeout_ms", self.resync_gap_timeout_ms),
            ("resync_retry_ms", self.resync_retry_ms),
            ("sync_cache_age_max_ms", self.sync_cache_age_max_ms),
            (
                "ghosts_created_per_check_max",
                u64::from(self.ghosts_created_per_check_max),
            ),
            (
                "ghosts_deleted_per_check_max",
                u64::from(self.ghosts_deleted_per_check_max),
            ),
            (
                "migrations_per_check_max",
                u64::from(self.migrations_per_check_max),
            ),
            ("forward_hops_max", u64::from(self.forward_hops_max)),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(invalid(key, "must be > 0"));
            }
        }
        let sizes = [
            ("forward_table_max", self.forward_table_max),
            ("input_buffer_max", self.input_buffer_max),
            ("pending_calls_max", self.pending_calls_max),
            ("reorder_buffer_max", self.reorder_buffer_max),
            ("sync_cache_max", self.sync_cache_max),
            ("sync_cache_bytes_max", self.sync_cache_bytes_max),
            ("catch_up_queue_max", self.catch_up_queue_max),
            ("early_msgs_max", self.early_msgs_max),
        ];
        for (key, v) in sizes {
            if v == 0 {
                return Err(invalid(key, "must be > 0"));
            }
        }
        Ok(())
    }

    /// The check period as a duration.
    pub fn check_period(&self) -> Duration {
        Duration::from_millis(self.check_period_ms)
    }

    /// The ghosts' reorder buffer bounds.
    pub fn reorder(&self) -> ReorderParams {
        ReorderParams {
            reorder_buffer_max: self.reorder_buffer_max,
            gap_timeout_ms: self.resync_gap_timeout_ms,
            resync_retry_ms: self.resync_retry_ms,
        }
    }

    /// The reals' sync cache bounds.
    pub fn sync_cache(&self) -> SyncCacheParams {
        SyncCacheParams {
            cache_msgs_max: self.sync_cache_max,
            cache_bytes_max: self.sync_cache_bytes_max,
            cache_age_max_ms: self.sync_cache_age_max_ms,
        }
    }

    /// Ghost rect half-size for deletion (radius plus keep margin).
    pub fn ghost_keep_radius_m(&self) -> f64 {
        self.ghost_radius_m + self.ghost_keep_margin_m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        CellParams::default().validate().expect("defaults");
    }

    #[test]
    fn margin_must_be_below_radius() {
        let p = CellParams {
            migrate_margin_m: 50.0,
            ..CellParams::default()
        };
        assert_eq!(
            p.validate(),
            Err(invalid("migrate_margin_m", "must be < ghost_radius_m"))
        );
    }

    #[test]
    fn zero_bounds_name_their_key() {
        let p = CellParams {
            input_buffer_max: 0,
            ..CellParams::default()
        };
        let err = p.validate().unwrap_err().to_string();
        assert!(err.contains("input_buffer_max"), "{err}");
        let p = CellParams {
            ghost_radius_m: f64::NAN,
            ..CellParams::default()
        };
        assert!(p.validate().is_err());
    }
}
