//! `deploy/grafana/tessera.json`, the Grafana dashboard over the admin
//! port's `/metrics`: it has what Grafana needs to import it (a Prometheus
//! datasource variable, panels with unique ids, a grid position and
//! targets), it covers what operators watch, and every metric its PromQL
//! names is one a real server exports (collected from a small runtime's
//! `/metrics` text, so a renamed metric fails here).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera::config::Config;
use tessera::runtime::Runtime;
use tessera::server::CellHost;

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/grafana/tessera.json"
    );
    let text = std::fs::read_to_string(path).expect("the dashboard is in the repository");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

fn panels(d: &Value) -> &Vec<Value> {
    d["panels"].as_array().expect("panels is an array")
}

/// Every PromQL expression of the dashboard: panel targets and the
/// templating queries.
fn exprs(d: &Value) -> Vec<String> {
    let mut out: Vec<String> = panels(d)
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("a target has an expr").to_owned())
        .collect();
    for v in d["templating"]["list"].as_array().expect("templating list") {
        if let Some(q) = v["query"]["query"].as_str() {
            out.push(q.to_owned());
        }
    }
    out
}

/// The `tessera_*` identifiers in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut i = 0;
    while i < b.len() {
        if ident(b[i]) && (i == 0 || !ident(b[i - 1])) {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            if word.starts_with("tessera_") {
                out.push(word.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn the_dashboard_has_what_grafana_imports() {
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["uid"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 30));
    let vars = d["templating"]["list"].as_array().expect("templating");
    let ds = vars
        .iter()
        .find(|v| v["type"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(ds["query"], "prometheus");
    let ds_ref = format!("${{{}}}", ds["name"].as_str().expect("named"));
    let ps = panels(&d);
    assert!(ps.len() >= 10, "{} panels", ps.len());
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for p in ps {
        let id = p["id"].as_u64().expect("a numeric id");
        assert!(ids.insert(id), "panel id {id} twice");
        let g = &p["gridPos"];
        let [h, w, x, y] = ["h", "w", "x", "y"].map(|k| g[k].as_u64().expect("gridPos h w x y"));
        assert!(h > 0 && w > 0 && x + w <= 24, "panel {id}: gridPos {g}");
        for row in y..y + h {
            for col in x..x + w {
                assert!(
                    cells.insert((row, col)),
                    "panel {id} overlaps another at {row},{col}"
                );
            }
        }
        if p["type"] == "row" {
            continue;
        }
        assert!(
            p["title"].as_str().is_some_and(|t| !t.is_empty()),
            "panel {id} title"
        );
        assert_eq!(
            p["datasource"]["uid"],
            ds_ref.as_str(),
            "panel {id} datasource"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {id} has no target");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert!(
                refs.insert(t["refId"].as_str().expect("refId")),
                "panel {id} refId twice"
            );
            assert_eq!(t["datasource"]["uid"], ds_ref.as_str(), "panel {id} target");
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "panel {id} expr"
            );
        }
    }
}

/// What the issue asks the dashboard to show, by the metric that shows it.
#[test]
fn the_dashboard_covers_what_operators_watch() {
    let all: BTreeSet<String> = exprs(&dashboard())
        .iter()
        .flat_map(|e| metric_names(e))
        .collect();
    for needed in [
        "tessera_app_gateway_clients",
        "tessera_shard_tick_p99_window_us",
        "tessera_app_host_migrations_total",
        "tessera_app_host_aoi_enters_total",
        "tessera_app_host_aoi_leaves_total",
        "tessera_shard_client_bytes_in_total",
        "tessera_shard_client_bytes_out_total",
        "tessera_shard_client_writes_total",
        "tessera_app_gateway_disconnects_slow_reader_total",
        "tessera_app_gateway_disconnects_kicked_total",
        "tessera_app_host_splits_total",
        "tessera_app_host_merges_total",
        "tessera_app_host_rebalances_total",
    ] {
        assert!(all.contains(needed), "no panel shows {needed}");
    }
}

/// The sample names of a real server's `/metrics` (2 shards, NPCs walking,
/// the gateway listening on loopback), once the application's metrics are
/// published.
fn exported() -> BTreeSet<String> {
    let sets: Vec<String> = [
        "world.max_x_m=480.0",
        "world.max_z_m=240.0",
        "server.initial_cells=2",
        "server.npcs=8",
        "runtime.shards=2",
        "runtime.pin=false",
        "runtime.tick_ms=20",
        "runtime.tick_budget_ms=20",
        "admin.enabled=false",
        "gateway.listen_addr=127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let c = Config::load(None, &sets).expect("valid test config");
    let shared = std::sync::Arc::new(c.clone());
    let handle = Runtime::start(&c, move |ctx| CellHost::new(&shared, ctx).expect("host"))
        .expect("runtime starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = handle.metrics_text();
        let published = text.contains("tessera_app_host_migrations_total{shard=\"1\"}")
            && text.contains("tessera_app_gateway_clients{shard=\"0\"}");
        if published || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    handle.shutdown();
    handle.join().expect("clean join");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn every_metric_the_dashboard_names_is_exported() {
    let exported = exported();
    assert!(
        exported.contains("tessera_app_gateway_clients"),
        "app metrics never published: {exported:?}"
    );
    for e in exprs(&dashboard()) {
        let names = metric_names(&e);
        assert!(!names.is_empty(), "no tessera metric in `{e}`");
        for n in names {
            assert!(
                exported.contains(&n),
                "`{n}` (in `{e}`) is not exported by tessera; exported: {exported:?}"
            );
        }
    }
}

#[test]
fn names_are_read_out_of_promql() {
    assert_eq!(
        metric_names("rate(tessera_a_total{shard=~\"$shard\"}[5m]) / clamp_min(tessera_b, 1)"),
        vec!["tessera_a_total", "tessera_b"]
    );
    assert!(metric_names("sum(up{job=\"x_tessera_y\"})").is_empty());
}
