//! Where each server's kernel part goes, function by function
//! (`--kernel-top N`): every run's inclusive kernel-function shares
//! (`perf_split`, from call graphs) times that run's CPU µs per
//! client-second, the median per server over the row's runs, the largest N
//! side by side. The kernel's part is set by the traffic only in part: on
//! loopback the server's core also runs its clients' receive path (a send
//! goes through `tcp_v4_rcv` of the client's socket in the sender's
//! context), and how dear that is depends on when the server writes
//! (bench/README.md, sixteenth round); this table is how to see it.
//!
//! Owns only the folding and the table; knows nothing of processes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::orchestrate::{median, Kind, Sample};

/// The `top` kernel functions of the row at `clients`, as JSON objects
/// `{"fn": name, "<server>": µs per client-second, ...}`: for each server
/// with call-graph samples, the median over its runs (0 in a run that never
/// sampled the function); the functions with the largest median on any
/// server, largest first. Empty without call-graph samples.
pub fn rows(clients: usize, samples: &[(Kind, Sample)], top: usize) -> Vec<Value> {
    // The row's runs with call-graph samples, by server.
    let mut by_kind: BTreeMap<Kind, Vec<&Sample>> = BTreeMap::new();
    for (k, s) in samples {
        if s.clients == clients && !s.kernel_fns.is_empty() {
            by_kind.entry(*k).or_default().push(s);
        }
    }
    let mut by_fn: BTreeMap<&str, BTreeMap<Kind, f64>> = BTreeMap::new();
    for (&k, runs) in &by_kind {
        let names: BTreeSet<&str> = runs
            .iter()
            .flat_map(|s| s.kernel_fns.iter().map(|(n, _)| n.as_str()))
            .collect();
        for name in names {
            let each: Vec<f64> = runs
                .iter()
                .map(|s| {
                    s.kernel_fns
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(0.0, |(_, us)| *us)
                })
                .collect();
            if let Some(m) = median(&each) {
                by_fn.entry(name).or_default().insert(k, m);
            }
        }
    }
    let mut order: Vec<(&str, f64)> = by_fn
        .iter()
        .map(|(n, m)| (*n, m.values().copied().fold(0.0, f64::max)))
        .collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    order.truncate(top);
    order
        .into_iter()
        .map(|(name, _)| {
            let mut o = Map::new();
            o.insert("fn".to_owned(), json!(name));
            for &k in by_kind.keys() {
                let us = by_fn[name].get(&k).copied().unwrap_or(0.0);
                o.insert(k.role().to_owned(), json!((us * 100.0).round() / 100.0));
            }
            Value::Object(o)
        })
        .collect()
}

/// A readable table of one row's [`rows`] (µs per client-second,
/// inclusive), one column per server in `rows`' order.
pub fn table(clients: usize, rows: &[Value]) -> String {
    let servers: Vec<String> = rows
        .first()
        .and_then(Value::as_object)
        .map(|o| o.keys().filter(|k| *k != "fn").cloned().collect())
        .unwrap_or_default();
    let mut s = format!(
        "| kernel function at {clients} clients (µs/client/s, inclusive) | {} |\n|---|{}\n",
        servers.join(" | "),
        "---|".repeat(servers.len())
    );
    for r in rows {
        let name = r.get("fn").and_then(Value::as_str).unwrap_or("?");
        let cells: Vec<String> = servers
            .iter()
            .map(|k| r.get(k).map_or("-".to_owned(), |v| format!("{v}")))
            .collect();
        s.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(clients: usize, fns: &[(&str, f64)]) -> Sample {
        let mut s = super::super::orchestrate::tests::sample(clients, 100.0, clients as u64);
        s.kernel_fns = fns.iter().map(|(n, us)| ((*n).to_owned(), *us)).collect();
        s
    }

    #[test]
    fn medians_per_server_with_the_largest_functions_first() {
        let samples = vec![
            (
                Kind::Uring,
                run(10, &[("io_send", 30.0), ("tcp_v4_rcv", 15.0)]),
            ),
            (
                Kind::Uring,
                run(10, &[("io_send", 34.0), ("tcp_v4_rcv", 17.0)]),
            ),
            (
                Kind::Tessera,
                run(10, &[("io_send", 50.0), ("tcp_v4_rcv", 28.0)]),
            ),
            // Never sampled in this run: counts as 0 in the median.
            (Kind::Tessera, run(10, &[("io_send", 52.0), ("rare", 9.0)])),
            (Kind::Tessera, run(20, &[("other_row", 99.0)])),
        ];
        let rows = rows(10, &samples, 2);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0]["fn"], "io_send");
        assert_eq!(rows[0]["io_uring"], 32.0);
        assert_eq!(rows[0]["tessera"], 51.0);
        assert_eq!(rows[1]["fn"], "tcp_v4_rcv");
        assert_eq!(rows[1]["tessera"], 14.0, "(28 + 0) / 2");
        let t = table(10, &rows);
        assert!(t.contains("| io_send | 32.0 | 51.0 |"), "{t}");
        assert!(super::rows(30, &samples, 5).is_empty());
    }
}
