//! A remote server's own counters, scraped from its admin `/metrics`.
//!
//! Owns a minimal HTTP/1.1 GET over a std socket (one request, bounded
//! reply, timeouts) and parsers of the OpenMetrics text: one sums every
//! sample of a metric over its labels (the shards), one lists a metric's
//! samples per label set (per shard). No HTTP client crate:
//! the admin endpoint is plain text on loopback or a LAN.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest `/metrics` reply read.
pub const REPLY_BYTES_MAX: usize = 8 << 20;

/// Fetches `http://{admin}/metrics`: the OpenMetrics text ([`parse_metrics`]
/// sums it by metric, [`samples`] lists one metric per label set).
///
/// # Errors
/// If the address does not resolve, the connection fails or times out, or
/// the reply is not a 200.
pub fn scrape_text(admin: &str, timeout: Duration) -> anyhow::Result<String> {
    let addr = admin
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{admin} does not resolve"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = Vec::new();
    s.take(REPLY_BYTES_MAX as u64).read_to_end(&mut reply)?;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header from {admin}"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        let status = head.lines().next().unwrap_or_default();
        anyhow::bail!("{admin}/metrics answered {status}");
    }
    Ok(body.to_owned())
}

/// Every sample of metric `name` (one per label set, e.g. per shard), in
/// the order the text lists them.
pub fn samples(text: &str, name: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(r) => r.rsplit_once('}')?.1,
                None if rest.starts_with(' ') => rest,
                None => return None,
            };
            value.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

/// Sums each sample line `name{labels} value` by name (comments, `# EOF`
/// and unparsable values skipped).
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let value_part = match rest.strip_prefix('{') {
            Some(r) => r.rsplit_once('}').map_or("", |(_, v)| v),
            None => rest,
        };
        let Some(v) = value_part.split_whitespace().next() else {
            continue;
        };
        if let Ok(v) = v.parse::<f64>() {
            *out.entry(name.to_owned()).or_insert(0.0) += v;
        }
    }
    out
}

/// The figure `names[0]` (or the first of `names` present), as an integer.
pub fn pick(metrics: &BTreeMap<String, f64>, names: &[&str]) -> Option<u64> {
    names
        .iter()
        .find_map(|n| metrics.get(*n))
        .map(|v| v.max(0.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_summed_over_shards() {
        let text = "# HELP host_migrations x\n# TYPE host_migrations counter\n\
                    host_migrations_total{shard=\"0\"} 5\nhost_migrations_total{shard=\"1\"} 7\n\
                    host_reals 3\nweird{a=\"}\"} 2\nbad{x=\"1\"} nope\n# EOF\n";
        let m = parse_metrics(text);
        assert_eq!(m["host_migrations_total"], 12.0);
        assert_eq!(m["host_reals"], 3.0);
        assert_eq!(m["weird"], 2.0);
        assert!(!m.contains_key("bad"));
        assert_eq!(pick(&m, &["nope", "host_reals"]), Some(3));
        assert_eq!(pick(&m, &["nope"]), None);
    }

    #[test]
    fn an_unreachable_admin_is_an_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        drop(l);
        assert!(scrape_text(&addr, Duration::from_millis(300)).is_err());
    }

    #[test]
    fn samples_are_listed_per_label_set() {
        let text = "# TYPE tessera_shard_tick_p99_window_us gauge\n\
                    tessera_shard_tick_p99_window_us{shard=\"0\"} 1500\n\
                    tessera_shard_tick_p99_window_us{shard=\"1\"} 42000\n\
                    tessera_shard_tick_p99_window_us_other 7\n";
        assert_eq!(
            samples(text, "tessera_shard_tick_p99_window_us"),
            vec![1500.0, 42000.0]
        );
        assert!(samples(text, "absent").is_empty());
    }
}
