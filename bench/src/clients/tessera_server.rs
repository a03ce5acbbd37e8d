//! tessera itself as the bench's server: one shard pinned to the server
//! CPU, the gateway on, started through `EmbeddedServer` with the world
//! loadgen would give the same number of bots (`loadgen --print-server-sets`).
//!
//! Owns only the start and the `stat` lines (its published counters); must
//! not touch the server's internals.

use std::time::Duration;

use clap::Parser;
use serde_json::json;
use tessera::config::Config;
use tessera::server::EmbeddedServer;

use super::sys;

/// The config of a one-shard tessera on `cpu` for `clients` bots: loadgen's
/// auto world for that many bots, the gateway and admin on free ports, and
/// one view update per client every `write_ms` (`view.client_update_hz`),
/// so tessera writes to a client as often as the bare servers do: the cost
/// is per write, and the comparison is of the same traffic.
///
/// # Errors
/// If loadgen's settings do not make a valid config.
pub fn config(
    clients: usize,
    cpu: usize,
    write_ms: u64,
    io_backend: &str,
) -> anyhow::Result<Config> {
    config_with(clients, cpu, write_ms, io_backend, &[])
}

/// As [`config`], with more of loadgen's arguments after these (`--in-view
/// N`, `--set key=value`: the last word wins).
///
/// # Errors
/// As [`config`].
pub fn config_with(
    clients: usize,
    cpu: usize,
    write_ms: u64,
    io_backend: &str,
    extra: &[String],
) -> anyhow::Result<Config> {
    let conns = clients.max(10_000);
    let base = [
        "loadgen".to_owned(),
        "--bots".to_owned(),
        clients.to_string(),
        "--shards".to_owned(),
        "1".to_owned(),
        "--set".to_owned(),
        format!("runtime.cpus=[{cpu}]"),
        "--set".to_owned(),
        "runtime.pin=true".to_owned(),
        "--set".to_owned(),
        format!("gateway.connections_max={conns}"),
        "--set".to_owned(),
        format!(
            "view.client_update_hz={:.3}",
            1000.0 / write_ms.max(1) as f64
        ),
        "--set".to_owned(),
        format!("gateway.io_backend=\"{io_backend}\""),
    ];
    let args = base.iter().chain(extra);
    let cli = loadgen::cli::Cli::try_parse_from(args)?;
    loadgen::run::server_config(&cli)
}

/// `KEY=VALUE` overrides as the `--set` arguments [`config_with`] takes.
pub fn set_args(sets: &[String]) -> Vec<String> {
    sets.iter()
        .flat_map(|kv| ["--set".to_owned(), kv.clone()])
        .collect()
}

/// The world sized for about `in_view` entities in each view (loadgen's
/// `--in-view`) and `KEY=VALUE` overrides, as [`config_with`]'s arguments.
pub fn extra_args(in_view: f64, sets: &[String]) -> Vec<String> {
    let mut args = vec!["--in-view".to_owned(), format!("{in_view:?}")];
    args.extend(set_args(sets));
    args
}

/// Runs tessera until the process is killed, with `extra` (loadgen's
/// arguments, [`extra_args`]) applied last.
///
/// # Errors
/// If the config is refused or the server cannot start.
pub fn run(
    clients: usize,
    cpu: usize,
    write_ms: u64,
    io_backend: &str,
    extra: &[String],
) -> anyhow::Result<()> {
    sys::raise_nofile(sys::files_for(clients))?;
    let config = config_with(clients, cpu, write_ms, io_backend, extra)?;
    let server = EmbeddedServer::start(&config)?;
    sys::emit("ready", &json!({"addr": server.client_addr().to_string()}));
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let c = server.counters();
        sys::emit(
            "stat",
            &json!({
                "clients": c.clients,
                "stalls": c.stalls,
                "refused": c.refused.values().sum::<u64>(),
                "disconnects": c.disconnects.values().sum::<u64>(),
                "tick_p99_window_us": c.tick_p99_window_us,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Overrides come after the bench's own settings (the last word wins)
    /// and an unknown key is refused.
    #[test]
    fn overrides_apply_last_and_unknown_keys_are_refused() {
        let set = |kv: &str| vec!["--set".to_owned(), kv.to_owned()];
        let c = config_with(2000, 0, 100, "epoll", &set("gateway.io_poll_ms=25")).unwrap();
        assert_eq!(c.gateway.io_poll_ms, 25);
        let c = config_with(2000, 0, 100, "epoll", &set("view.client_update_hz=20.0")).unwrap();
        assert!(
            (c.view.client_update_hz - 20.0).abs() < 1e-9,
            "over --tick-ms"
        );
        assert!(config_with(2000, 0, 100, "epoll", &set("gateway.no_such_knob=1")).is_err());
    }

    #[test]
    fn the_config_is_one_pinned_shard_in_loadgens_world() {
        let c = config(2000, 0, 100, "epoll").unwrap();
        assert!((c.view.client_update_hz - 10.0).abs() < 1e-9);
        assert_eq!(c.runtime.shards, 1);
        assert_eq!(c.runtime.cpus, vec![0]);
        assert!(c.runtime.pin);
        assert!(c.gateway.connections_max >= 10_000);
        let area =
            |c: &Config| (c.world.max_x_m - c.world.min_x_m) * (c.world.max_z_m - c.world.min_z_m);
        let large = config(10_000, 0, 100, "epoll").unwrap();
        let uring = config(2000, 0, 100, "io_uring").unwrap();
        assert_eq!(uring.gateway.io_backend, "io_uring");
        assert!(
            area(&large) > 4.0 * area(&c),
            "the world grows with the bots"
        );
    }

    /// `--in-view` sizes the world (about 60 times the area for one in
    /// view than for loadgen's 60), and a set that changes the AOI radius
    /// resizes it for the same density: the load walks in whatever world
    /// the overrides give tessera (`orchestrate::world`).
    #[test]
    fn the_world_follows_the_density_and_the_overrides() {
        let area =
            |c: &Config| (c.world.max_x_m - c.world.min_x_m) * (c.world.max_z_m - c.world.min_z_m);
        let at = |in_view: f64, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
            config_with(5000, 0, 100, "epoll", &extra_args(in_view, &sets)).unwrap()
        };
        let dense = at(60.0, &[]);
        assert_eq!(area(&dense), area(&config(5000, 0, 100, "epoll").unwrap()));
        let ratio = area(&at(1.0, &[])) / area(&dense);
        assert!(
            (40.0..=80.0).contains(&ratio),
            "one in view: {ratio}x the area"
        );
        let small = at(60.0, &["aoi.radius_m=10.0", "aoi.leave_radius_m=12.0"]);
        assert!(
            area(&small) < area(&dense) / 4.0,
            "a smaller radius, a smaller world"
        );
    }
}
