//! Figures per distance band: how often an observer is updated about an
//! entity, and how late, by how far away the entity is (issue 12).
//!
//! Owns [`BandEdges`] (the bands' upper distances, from the server's
//! `[view]` bands, the last capped at the AOI leave radius), the per-band
//! counts the bots keep ([`BandCounts`], [`BandHists`]) and the report
//! rows ([`BandFigure`]). Plain data: the bots fill it, the report reads it.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::measure::{new_hist, Percentiles};

/// Most bands (the server's `view::budget::BANDS_MAX`).
pub const BANDS: usize = 4;

/// The bands' upper distances, nearest first (ground metres).
#[derive(Clone, Debug, PartialEq)]
pub struct BandEdges {
    edges: Vec<f64>,
}

impl BandEdges {
    /// Bands ending at `edges` (ascending; at most [`BANDS`], the rest are
    /// dropped), the last one capped at `view_m`.
    pub fn new(edges: &[f64], view_m: f64) -> Self {
        let mut edges: Vec<f64> = edges.iter().copied().take(BANDS).collect();
        if let Some(last) = edges.last_mut() {
            *last = last.min(view_m).max(0.0);
        }
        if edges.is_empty() {
            edges.push(view_m);
        }
        BandEdges { edges }
    }

    /// The band of an entity `dist_m` away (the last beyond every edge).
    pub fn of(&self, dist_m: f64) -> usize {
        self.edges
            .iter()
            .position(|&e| dist_m <= e)
            .unwrap_or(self.edges.len() - 1)
    }

    /// The upper distances.
    pub fn edges(&self) -> &[f64] {
        &self.edges
    }
}

/// Per-band counts (per interval; summed by the report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BandCounts {
    /// Updates (moves, props) received of entities in the band.
    pub updates: [u64; BANDS],
    /// Samples of entities shown in the band (one per entity per move tick).
    pub entity_samples: [u64; BANDS],
}

impl BandCounts {
    /// Adds `o`.
    pub fn add(&mut self, o: &BandCounts) {
        for i in 0..BANDS {
            self.updates[i] += o.updates[i];
            self.entity_samples[i] += o.entity_samples[i];
        }
    }
}

/// Per-band update latency, µs.
#[derive(Clone, Debug)]
pub struct BandHists {
    /// One histogram per band.
    pub latency: [Histogram<u64>; BANDS],
}

impl Default for BandHists {
    fn default() -> Self {
        BandHists {
            latency: std::array::from_fn(|_| new_hist()),
        }
    }
}

impl BandHists {
    /// Adds `o`.
    pub fn add(&mut self, o: &BandHists) {
        for (a, b) in self.latency.iter_mut().zip(&o.latency) {
            a.add(b).expect("histograms share their bounds");
        }
    }
}

/// Latency of one band in the report, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BandLatency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// One band of the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BandFigure {
    /// Upper distance, m.
    pub to_m: f64,
    /// Updates an observer received per entity of the band per second.
    pub updates_per_entity_per_s: f64,
    /// Average entities of the band in a view.
    pub in_view_avg: f64,
    /// Update latency, ms.
    pub latency_ms: BandLatency,
}

/// The report rows: `sample_period_s` is the time one entity sample stands
/// for (the bots' move period), `view_samples` how many views were sampled.
pub fn figures(
    edges: &BandEdges,
    c: &BandCounts,
    h: &BandHists,
    sample_period_s: f64,
    view_samples: u64,
) -> Vec<BandFigure> {
    edges
        .edges()
        .iter()
        .enumerate()
        .map(|(i, &to_m)| {
            let entity_s = c.entity_samples[i] as f64 * sample_period_s;
            let p = Percentiles::of(&h.latency[i]);
            BandFigure {
                to_m,
                updates_per_entity_per_s: if entity_s > 0.0 {
                    c.updates[i] as f64 / entity_s
                } else {
                    0.0
                },
                in_view_avg: if view_samples > 0 {
                    c.entity_samples[i] as f64 / view_samples as f64
                } else {
                    0.0
                },
                latency_ms: BandLatency {
                    p50: p.p50,
                    p99: p.p99,
                },
            }
        })
        .collect()
}

/// The summary's rows for the bands: (label, text).
pub fn rows(figs: &[BandFigure]) -> Vec<(String, String)> {
    let mut from = 0.0;
    figs.iter()
        .map(|f| {
            let label = format!("band {from:.0}-{:.0} m", f.to_m);
            from = f.to_m;
            let text = format!(
                "{:.1} in view, {:.2} updates/entity/s, latency p50 {:.1}  p99 {:.1} ms",
                f.in_view_avg, f.updates_per_entity_per_s, f.latency_ms.p50, f.latency_ms.p99
            );
            (label, text)
        })
        .collect()
}

/// Draws `bands.png` into `dir`: updates per entity per second by distance
/// band, each bar labelled with the band's latency p50/p99; returns the file.
///
/// # Errors
/// If the chart cannot be drawn or written.
pub fn chart(dir: &std::path::Path, figs: &[BandFigure]) -> anyhow::Result<std::path::PathBuf> {
    use plotters::prelude::*;
    crate::plot::register_font();
    std::fs::create_dir_all(dir)?;
    let file = dir.join("bands.png");
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(&file, (1000, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let x_max = figs.last().map_or(1.0, |f| f.to_m).max(1.0);
        let y_max = figs
            .iter()
            .map(|f| f.updates_per_entity_per_s)
            .fold(1.0, f64::max)
            * 1.25;
        let font = crate::plot::FONT;
        let mut c = ChartBuilder::on(&root)
            .caption(
                "Update rate by distance (per entity in view, steady window)",
                (font, 22),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        c.configure_mesh()
            .x_desc("distance from the observer (m)")
            .y_desc("updates per entity per second")
            .label_style((font, 14))
            .draw()?;
        let mut from = 0.0;
        for f in figs {
            let (lo, hi, y) = (from, f.to_m, f.updates_per_entity_per_s);
            c.draw_series(std::iter::once(Rectangle::new(
                [(lo, 0.0), (hi, y)],
                BLUE.mix(0.5).filled(),
            )))?;
            let label = format!(
                "{y:.1}/s, p50 {:.0} p99 {:.0} ms",
                f.latency_ms.p50, f.latency_ms.p99
            );
            c.draw_series(std::iter::once(Text::new(
                label,
                (lo + (hi - lo) * 0.05, y + y_max * 0.03),
                (font, 14),
            )))?;
            from = hi;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("drawing bands.png: {e}"))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record;

    #[test]
    fn bands_sort_distances_and_rates_follow_samples() {
        let e = BandEdges::new(&[15.0, 30.0, 1000.0], 48.0);
        assert_eq!(e.edges(), [15.0, 30.0, 48.0]);
        assert_eq!(e.of(3.0), 0);
        assert_eq!(e.of(15.5), 1);
        assert_eq!(e.of(500.0), 2);
        let mut c = BandCounts::default();
        // 2 entities in band 0 sampled 10 times at 0.1 s: 2 entity-seconds.
        c.entity_samples[0] = 20;
        c.updates[0] = 19;
        let mut h = BandHists::default();
        record(&mut h.latency[0], 40_000);
        let f = figures(&e, &c, &h, 0.1, 10);
        assert_eq!(f.len(), 3);
        assert!((f[0].updates_per_entity_per_s - 9.5).abs() < 1e-9);
        assert!((f[0].in_view_avg - 2.0).abs() < 1e-9);
        assert!((f[0].latency_ms.p99 - 40.0).abs() < 0.1);
        assert_eq!(f[1].updates_per_entity_per_s, 0.0);
        assert!(rows(&f)[0].1.contains("9.50 updates/entity/s"));
        let dir = std::env::temp_dir().join(format!("loadgen-bands-{}", std::process::id()));
        let png = chart(&dir, &f).expect("drawn");
        assert_eq!(&std::fs::read(&png).expect("written")[1..4], b"PNG");
        std::fs::remove_dir_all(dir).ok();
        assert_eq!(rows(&f)[1].0, "band 15-30 m");
    }
}
