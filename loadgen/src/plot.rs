//! PNG charts of a run (`--plot DIR`), drawn with plotters' bitmap backend
//! and the DejaVu Sans font embedded by the `dejavu` crate (no system fonts
//! needed).
//!
//! Owns three charts: `latency.png` (update latency p50/p99/max per
//! second), `histogram.png` (the steady window's latency distribution) and
//! `bots_migrations.png` (bots connected and migrations per second).

use std::path::{Path, PathBuf};
use std::sync::Once;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::report::Sample;

const SIZE: (u32, u32) = (1000, 600);
pub(crate) const FONT: &str = "sans-serif";

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font always parses; a failure only loses labels.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A named, coloured series of the latency chart.
type Line = (&'static str, RGBColor, fn(&Sample) -> f64);

/// Writes the three charts into `dir` (created if missing); returns the
/// files written.
///
/// # Errors
/// If the directory cannot be created or a chart cannot be drawn.
pub fn write_all(
    dir: &Path,
    series: &[Sample],
    hist: &Histogram<u64>,
) -> anyhow::Result<Vec<PathBuf>> {
    register_font();
    std::fs::create_dir_all(dir)?;
    let files = [
        dir.join("latency.png"),
        dir.join("histogram.png"),
        dir.join("bots_migrations.png"),
    ];
    let err = |e: Box<dyn std::error::Error>| anyhow::anyhow!("drawing a chart: {e}");
    latency_chart(&files[0], series).map_err(err)?;
    histogram_chart(&files[1], hist).map_err(err)?;
    bots_chart(&files[2], series).map_err(err)?;
    Ok(files.to_vec())
}

fn t_max(series: &[Sample]) -> f64 {
    series.last().map_or(1.0, |s| s.t_s.max(1.0))
}

fn latency_chart(file: &Path, series: &[Sample]) -> DrawResult {
    let root = BitMapBackend::new(file, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let y_max = series
        .iter()
        .map(|s| s.latency_ms.max)
        .fold(1.0_f64, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Update latency per second (mover input to observer receipt)",
            (FONT, 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max(series), 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("latency (ms)")
        .label_style((FONT, 14))
        .draw()?;
    let lines: [Line; 3] = [
        ("p50", BLUE, |s| s.latency_ms.p50),
        ("p99", RGBColor(230, 120, 0), |s| s.latency_ms.p99),
        ("max", RED, |s| s.latency_ms.max),
    ];
    for (name, color, f) in lines {
        let pts = series
            .iter()
            .filter(|s| s.latency_ms.count > 0)
            .map(|s| (s.t_s, f(s)));
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Bins of the latency distribution: `(lower ms, upper ms, count)` over
/// `0..p99.9` in `bins` equal bins, the rest in the last one.
pub fn latency_bins(hist: &Histogram<u64>, bins: usize) -> Vec<(f64, f64, u64)> {
    if hist.is_empty() || bins == 0 {
        return Vec::new();
    }
    let top_us = hist.value_at_quantile(0.999).max(1);
    let width_us = (top_us / bins as u64).max(1);
    let mut out: Vec<(f64, f64, u64)> = (0..bins as u64)
        .map(|i| {
            let lo = i * width_us;
            (lo as f64 / 1e3, (lo + width_us) as f64 / 1e3, 0)
        })
        .collect();
    for v in hist.iter_recorded() {
        let i = ((v.value_iterated_to() / width_us) as usize).min(bins - 1);
        out[i].2 += v.count_at_value();
    }
    out
}

fn histogram_chart(file: &Path, hist: &Histogram<u64>) -> DrawResult {
    let root = BitMapBackend::new(file, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let bins = latency_bins(hist, 60);
    let x_max = bins.last().map_or(1.0, |b| b.1);
    let y_max = bins.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Update latency distribution (steady window; last bin holds the tail)",
            (FONT, 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms)")
        .y_desc("updates")
        .label_style((FONT, 14))
        .draw()?;
    chart.draw_series(
        bins.iter().map(|&(lo, hi, n)| {
            Rectangle::new([(lo, 0.0), (hi, n as f64)], BLUE.mix(0.6).filled())
        }),
    )?;
    root.present()?;
    Ok(())
}

fn bots_chart(file: &Path, series: &[Sample]) -> DrawResult {
    let root = BitMapBackend::new(file, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(SIZE.1 / 2);
    let bots_max = series.iter().map(|s| s.connected).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(&top)
        .caption("Bots connected", (FONT, 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max(series), 0.0..bots_max)?;
    chart.configure_mesh().label_style((FONT, 13)).draw()?;
    chart.draw_series(LineSeries::new(
        series.iter().map(|s| (s.t_s, s.connected as f64)),
        BLUE.stroke_width(2),
    ))?;
    let per_s = migrations_per_s(series);
    let m_max = per_s.iter().map(|p| p.1).fold(1.0_f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "Migrations per second (server; client-seen crossings if unknown)",
            (FONT, 20),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max(series), 0.0..m_max)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .label_style((FONT, 13))
        .draw()?;
    chart.draw_series(LineSeries::new(per_s, RED.stroke_width(2)))?;
    root.present()?;
    Ok(())
}

/// Migrations per second from the cumulative server figure (or the
/// client-seen crossings when the server's figure is unknown).
pub fn migrations_per_s(series: &[Sample]) -> Vec<(f64, f64)> {
    let mut prev = None;
    series
        .iter()
        .map(|s| {
            let v = match (s.migrations, prev) {
                (Some(m), Some(p)) => m.saturating_sub(p) as f64,
                (Some(_), None) => 0.0,
                (None, _) => s.crossings as f64,
            };
            prev = s.migrations;
            (s.t_s, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{new_hist, record};

    #[test]
    fn bins_cover_the_distribution() {
        let mut h = new_hist();
        for ms in 1..=100u64 {
            record(&mut h, ms * 1000);
        }
        let bins = latency_bins(&h, 10);
        assert_eq!(bins.len(), 10);
        assert_eq!(bins.iter().map(|b| b.2).sum::<u64>(), 100);
        assert!(latency_bins(&new_hist(), 10).is_empty());
    }

    #[test]
    fn charts_are_written() {
        let dir = std::env::temp_dir().join(format!("loadgen-plot-{}", std::process::id()));
        let mut h = new_hist();
        record(&mut h, 20_000);
        let series: Vec<Sample> = (1..5u64)
            .map(|t| Sample {
                t_s: t as f64,
                connected: 10,
                migrations: Some(t * 3),
                ..Sample::default()
            })
            .collect();
        let files = write_all(&dir, &series, &h).expect("drawn");
        for f in &files {
            let bytes = std::fs::read(f).expect("written");
            assert_eq!(&bytes[1..4], b"PNG", "{f:?}");
        }
        assert_eq!(migrations_per_s(&series)[1], (2.0, 3.0));
        std::fs::remove_dir_all(dir).ok();
    }
}
