//! Configuration: `tessera.toml`, typed, defaulted and validated.
//!
//! Three layers, merged key by key: the defaults embedded in the binary
//! (`defaults.toml`), an optional file, then `section.key=value` overrides from
//! the command line. Unknown keys are refused (a typo names itself), and
//! [`Config::validate`] checks every value and every relation between values,
//! naming the key and the rule it breaks.
//!
//! [`WorldConfig`] must be identical on every shard and node: its
//! [`WorldConfig::fingerprint`] is exchanged when shards connect. The other
//! sections are tunable per process.
//!
//! Owns parsing and validation only; it must not reach into the runtime.

mod balance;
mod layers;
mod sections;
mod view;

pub use balance::{BalanceConfig, BalancerParams, SpacesConfig};
pub use sections::{
    AdminConfig, AoiConfig, CellConfig, GatewayConfig, MeshConfig, RuntimeConfig, ServerConfig,
    SpaceConfig, SyncConfig, TestingConfig, WorldConfig,
};
pub use view::{ticks_per_update, visit_span, BandConfig, ViewConfig};

use crate::core::cell::CellParams;
use crate::core::space::SpaceParams;

use serde::{Deserialize, Serialize};
use std::path::Path;
use toml::Table;

/// The embedded defaults, as TOML text.
pub const DEFAULTS_TOML: &str = include_str!("defaults.toml");

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The TOML does not parse, or a key is unknown or of the wrong type.
    #[error("config {origin}: {message}")]
    Parse {
        /// Where the text came from (a file path, "defaults" or "overrides").
        origin: String,
        /// The parser's message, naming the key and line.
        message: String,
    },
    /// A `--set` override is malformed.
    #[error("bad override `{text}`: {why}")]
    Override {
        /// The override as given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A value breaks a rule.
    #[error("config key `{key}` = {value}: {rule}")]
    Invalid {
        /// The dotted key, e.g. `cell.migrate_margin_m`.
        key: String,
        /// The value found, formatted.
        value: String,
        /// The rule it breaks.
        rule: String,
    },
}

/// The whole configuration of one process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The world: the same on every shard.
    pub world: WorldConfig,
    /// The space tree's geometry rules.
    pub space: SpaceConfig,
    /// The space service: on/off, period, and the balancing policy's
    /// thresholds (splits, rebalances, merges).
    pub balance: BalanceConfig,
    /// Space types (union world, instanced towns, dungeons, matches).
    #[serde(default)]
    pub spaces: SpacesConfig,
    /// The area of interest of observers.
    pub aoi: AoiConfig,
    /// Each client's downstream budget and view bands.
    pub view: ViewConfig,
    /// Ghosting and migration knobs of every cell.
    pub cell: CellConfig,
    /// Property sync ordering and caching.
    pub sync: SyncConfig,
    /// Executors, placement, the tick loop.
    pub runtime: RuntimeConfig,
    /// Queues between shards.
    pub mesh: MeshConfig,
    /// The admin endpoint.
    pub admin: AdminConfig,
    /// The server's initial world population.
    pub server: ServerConfig,
    /// The client TCP gateway.
    pub gateway: GatewayConfig,
    /// Test hooks: faults injected on purpose (default none).
    pub testing: TestingConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config::load(None, &[]).expect("the embedded defaults are valid")
    }
}

impl Config {
    /// Builds the effective configuration: defaults, then `file`, then
    /// `overrides` (`section.key=value` each), then validation.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, key or rule at fault.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Config, ConfigError> {
        let mut table = parse_table(DEFAULTS_TOML, "defaults")?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.display().to_string(),
                source,
            })?;
            layers::merge(&mut table, parse_table(&text, &path.display().to_string())?);
        }
        for text in overrides {
            layers::apply_override(&mut table, text)?;
        }
        balance::check_keys(&table)?;
        let config: Config = Config::deserialize(table).map_err(|e| ConfigError::Parse {
            origin: file.map_or_else(|| "overrides".to_owned(), |p| p.display().to_string()),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Parses and validates a complete TOML text (defaults fill missing keys).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let mut table = parse_table(DEFAULTS_TOML, "defaults")?;
        layers::merge(&mut table, parse_table(text, "text")?);
        balance::check_keys(&table)?;
        let config = Config::deserialize(table).map_err(|e| ConfigError::Parse {
            origin: "text".to_owned(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// The effective configuration as TOML (what `--print-config` prints).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serialises")
    }

    /// The params every cell runs with.
    pub fn cell_params(&self) -> CellParams {
        sections::cell_params(&self.world, &self.cell, &self.sync)
    }

    /// The view params every cell runs with: the AOI grid covers the world,
    /// radii and interest bound from `[aoi]`, each client's budget and bands
    /// from `[view]` at the `[runtime]` tick, the observers' `[testing]`
    /// fault.
    pub fn view_params(&self) -> crate::core::cell::ViewParams {
        use crate::core::aoi::AoiParams;
        use crate::core::cell::ViewParams;
        use crate::core::view::ObserverParams;
        let d = ViewParams::default();
        let every = self.view.flush_every_ticks(self.runtime.tick_ms);
        ViewParams {
            aoi: AoiParams {
                world: self.world.bounds(),
                ..d.aoi
            },
            radius_m: self.aoi.radius_m,
            leave_radius_m: self.aoi.leave_radius_m,
            max_interest: self.aoi.max_interest,
            flush_every_ticks: every,
            flush_phases: self.view.client_phases.flush_phases(),
            aoi_every_flushes: self.aoi.update_every_flushes,
            observer: ObserverParams {
                budget: self.view.budget(self.runtime.tick_ms * u64::from(every)),
                fault: self.testing.fault(),
                visit_span_max: self.view.visit_span_max(d.ghost_cache_max, every),
                ..d.observer
            },
            ..d
        }
    }

    /// The space tree's params.
    pub fn space_params(&self) -> SpaceParams {
        self.space.to_params(&self.world)
    }

    /// Checks every value and the relations between them.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first key that breaks a rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.world.validate()?;
        self.space.validate(&self.world)?;
        self.balance.validate()?;
        self.spaces.validate()?;
        self.aoi.validate(&self.world)?;
        sections::validate_cell(&self.world, &self.aoi, &self.cell, &self.sync)?;
        self.runtime.validate()?;
        self.view.validate(self.runtime.tick_ms)?;
        self.mesh.validate()?;
        self.admin.validate()?;
        self.server.validate()?;
        self.gateway.validate()?;
        self.testing.validate()
    }
}

fn parse_table(text: &str, origin: &str) -> Result<Table, ConfigError> {
    text.parse::<Table>().map_err(|e| ConfigError::Parse {
        origin: origin.to_owned(),
        message: e.to_string(),
    })
}

/// Builds a [`ConfigError::Invalid`].
pub(crate) fn invalid(
    key: impl Into<String>,
    value: impl std::fmt::Display,
    rule: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        value: value.to_string(),
        rule: rule.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_load_and_round_trip() {
        let config = Config::default();
        let again = Config::from_toml(&config.to_toml()).expect("printed config loads");
        assert_eq!(config, again);
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::from_toml("[cell]\nmigrate_margn_m = 3.0").unwrap_err();
        assert!(err.to_string().contains("migrate_margn_m"), "{err}");
    }

    #[test]
    fn overrides_apply_and_validate() {
        let config = Config::load(None, &["world.ghost_radius_m=80".into()]).expect("valid");
        assert_eq!(config.world.ghost_radius_m, 80.0);
        let err = Config::load(None, &["world.ghost_radius_m=-1".into()]).unwrap_err();
        assert!(err.to_string().contains("world.ghost_radius_m"), "{err}");
    }

    fn key_of(err: &ConfigError) -> &str {
        match err {
            ConfigError::Invalid { key, .. } => key,
            other => panic!("expected an invalid key, got {other}"),
        }
    }

    #[test]
    fn relations_between_keys_are_checked() {
        let cases: [(&[&str], &str); 4] = [
            (
                &["aoi.leave_radius_m=70", "aoi.radius_m=60"],
                "aoi.leave_radius_m",
            ),
            (&["world.max_x_m=100"], "world.max_x_m"),
            (&["balance.load_smoothing=2"], "balance.load_smoothing"),
            (&["space.min_cell_side_m=100"], "space.min_cell_side_m"),
        ];
        for (overrides, key) in cases {
            let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
            let err = Config::load(None, &overrides).unwrap_err();
            assert_eq!(key_of(&err), key, "{err}");
        }
        let err = Config::load(None, &["cell.migrate_margin_m=20".into()]).unwrap_err();
        assert_eq!(key_of(&err), "cell.migrate_margin_m", "{err}");
    }

    #[test]
    fn runtime_mesh_and_admin_keys_are_checked() {
        let config = Config::load(None, &["runtime.cpus=[0, 1]".into()]).expect("valid");
        assert_eq!(config.runtime.cpus, vec![0, 1]);
        for (text, key) in [
            ("runtime.tick_budget_ms=80", "runtime.tick_budget_ms"),
            ("mesh.batch_queue_depth=0", "mesh.batch_queue_depth"),
            ("mesh.outbox_items_max=10", "mesh.outbox_items_max"),
            ("admin.listen_addr=\"nowhere\"", "admin.listen_addr"),
            ("admin.viewer_publish_ticks=0", "admin.viewer_publish_ticks"),
            ("admin.viewer_entities_max=0", "admin.viewer_entities_max"),
            ("admin.viewer_events_max=8", "admin.viewer_events_max"),
            ("admin.viewer_streams_max=0", "admin.viewer_streams_max"),
            (
                "admin.viewer_stream_period_ms=5",
                "admin.viewer_stream_period_ms",
            ),
            ("server.npc_speed_mps=-1.0", "server.npc_speed_mps"),
            ("gateway.listen_addr=\"nowhere\"", "gateway.listen_addr"),
            ("gateway.frame_bytes_max=8", "gateway.frame_bytes_max"),
            (
                "gateway.send_queue_bytes_max=100",
                "gateway.send_queue_bytes_max",
            ),
            ("gateway.abuse_strikes_max=0", "gateway.abuse_strikes_max"),
            ("gateway.io_poll_ms=0", "gateway.io_poll_ms"),
            ("gateway.io_poll_ms=5000", "gateway.io_poll_ms"),
            ("gateway.io_events_max=1", "gateway.io_events_max"),
            ("gateway.io_backend=\"kqueue\"", "gateway.io_backend"),
            ("gateway.io_uring_entries=8", "gateway.io_uring_entries"),
            ("gateway.io_uring_buffers=1000", "gateway.io_uring_buffers"),
            ("gateway.io_uring_buffers=65536", "gateway.io_uring_buffers"),
            (
                "gateway.io_uring_buffer_bytes=16",
                "gateway.io_uring_buffer_bytes",
            ),
            ("gateway.accounts_max=0", "gateway.accounts_max"),
            ("gateway.handoffs_max=0", "gateway.handoffs_max"),
            ("gateway.proxy_follow_ms=600001", "gateway.proxy_follow_ms"),
            ("view.client_update_hz=0.0", "view.client_update_hz"),
            ("view.client_update_hz=5.0", "view.bands[0].min_hz"),
            (
                "gateway.handshake_timeout_ms=0",
                "gateway.handshake_timeout_ms",
            ),
            ("gateway.idle_timeout_ms=99", "gateway.idle_timeout_ms"),
            (
                "gateway.reconnect_window_ms=3600001",
                "gateway.reconnect_window_ms",
            ),
            ("gateway.auth=\"open\"", "gateway.auth"),
            ("gateway.auth=\"hmac\"", "gateway.key_file"),
            ("gateway.ticket_ttl_max_s=0", "gateway.ticket_ttl_max_s"),
            ("gateway.replay_table_max=0", "gateway.replay_table_max"),
        ] {
            let err = Config::load(None, &[text.into()]).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key: k, .. } if *k == key),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn the_client_update_rate_sets_the_flush_period_and_the_budget() {
        // The default: 10 Hz on 50 ms ticks.
        let c = Config::load(None, &[]).expect("defaults");
        let v = c.view_params();
        assert_eq!(v.flush_every_ticks, 2);
        assert_eq!(
            v.observer.budget.tick_ms, 100,
            "the pacer counts in flushes"
        );
        let c = Config::load(None, &["view.client_update_hz=20.0".into()]).expect("valid");
        assert_eq!(c.view_params().flush_every_ticks, 1);
        assert_eq!(c.view_params().observer.budget.tick_ms, 50);
        // Above the tick rate: every tick (a slow tick alone stays valid).
        let c = Config::load(None, &["runtime.tick_ms=200".into()]).expect("valid");
        assert_eq!(c.view_params().flush_every_ticks, 1);
    }

    #[test]
    fn client_phases_reach_the_cells_and_a_bad_one_is_named() {
        use crate::core::cell::FlushPhases;
        let c = Config::load(None, &[]).expect("defaults");
        assert_eq!(c.view_params().flush_phases, FlushPhases::Input);
        let c = Config::load(None, &["view.client_phases=\"aligned\"".into()]).expect("valid");
        assert_eq!(c.view_params().flush_phases, FlushPhases::Aligned);
        let c = Config::load(None, &["view.client_phases=\"spread\"".into()]).expect("valid");
        assert_eq!(c.view_params().flush_phases, FlushPhases::Spread);
        let err = Config::load(None, &["view.client_phases=\"sideways\"".into()])
            .expect_err("not a phase");
        assert!(err.to_string().contains("sideways"), "{err}");
    }

    #[test]
    fn aoi_update_every_flushes_reaches_the_cells_and_bad_ones_are_named() {
        let c = Config::load(None, &[]).expect("defaults");
        assert_eq!(c.view_params().aoi_every_flushes, 1);
        let c = Config::load(None, &["aoi.update_every_flushes=2".into()]).expect("valid");
        assert_eq!(c.view_params().aoi_every_flushes, 2);
        for bad in ["0", "9"] {
            let err = Config::load(None, &[format!("aoi.update_every_flushes={bad}")])
                .expect_err("out of range");
            assert_eq!(key_of(&err), "aoi.update_every_flushes", "{err}");
        }
    }

    #[test]
    fn faults_are_named_checked_and_refused_unless_allowed() {
        let config = Config::default();
        assert_eq!(config.testing.fault(), crate::core::fault::Fault::None);
        assert!(config.testing.check_allowed(false).is_ok());
        let config = Config::load(None, &["testing.fault=\"drop-leave\"".into()]).expect("valid");
        assert_eq!(config.testing.fault(), crate::core::fault::Fault::DropLeave);
        let err = config.testing.check_allowed(false).unwrap_err();
        assert_eq!(key_of(&err), "testing.fault", "{err}");
        assert!(err.to_string().contains("--allow-faults"), "{err}");
        assert!(config.testing.check_allowed(true).is_ok());
        let err = Config::load(None, &["testing.fault=\"drop-leaves\"".into()]).unwrap_err();
        assert_eq!(key_of(&err), "testing.fault", "{err}");
        assert!(err.to_string().contains("\"stale-version\""), "{err}");
    }

    #[test]
    fn the_ticket_key_is_read_only_with_hmac_and_refused_when_bad() {
        assert!(Config::default()
            .gateway
            .ticket_key()
            .expect("none")
            .is_none());
        let path = std::env::temp_dir().join(format!("tessera-key-{}.hex", std::process::id()));
        for (text, ok) in [("ab".repeat(32), true), ("ab".repeat(8), false)] {
            std::fs::write(&path, text).expect("write");
            let set = [
                "gateway.auth=\"hmac\"".to_owned(),
                format!("gateway.key_file=\"{}\"", path.display()),
            ];
            let c = Config::load(None, &set).expect("valid");
            match c.gateway.ticket_key() {
                Ok(k) => assert!(ok && k.is_some()),
                Err(e) => assert!(!ok && key_of(&e) == "gateway.key_file", "{e}"),
            }
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = Config::load(Some(Path::new("/nonexistent/tessera.toml")), &[]).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/tessera.toml"),
            "{err}"
        );
    }

    #[test]
    fn world_fingerprint_tracks_world_only() {
        let a = Config::default();
        let b = Config::load(None, &["cell.check_period_ms=300".into()]).expect("valid");
        let c = Config::load(None, &["world.ghost_radius_m=61".into()]).expect("valid");
        assert_eq!(a.world.fingerprint(), b.world.fingerprint());
        assert_ne!(a.world.fingerprint(), c.world.fingerprint());
    }
}
