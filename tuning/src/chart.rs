//! The PNG chart of a sweep (`tuning sweep --chart FILE.png`): one figure
//! against the swept values, drawn with plotters' bitmap backend and the
//! DejaVu Sans font of the `dejavu` crate (no system fonts needed).
//!
//! Owns the drawing only; the figures come from `measure`.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use crate::measure::Figures;

const SIZE: (u32, u32) = (1000, 600);
const FONT: &str = "sans-serif";

/// A figure a sweep can chart, by its command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Figure {
    /// Migrations per 1,000 ticks.
    MigrationsPerKilotick,
    /// Migrations per border crossing.
    MigrationsPerCrossing,
    /// Messages forwarded to a moved real per 1,000 ticks.
    ForwardedPerKilotick,
    /// Ghosts created per 1,000 ticks.
    GhostsCreatedPerKilotick,
    /// Syncs applied by ghosts per 1,000 ticks.
    GhostSyncsPerKilotick,
    /// View bytes per client per second.
    ViewBytesPerClientS,
    /// View updates per client per second.
    ViewUpdatesPerClientS,
    /// The busiest shard's work over the mean (mean over seeds).
    LoadSpread,
}

impl Figure {
    /// The figure's value in `f`.
    pub fn of(self, f: &Figures) -> f64 {
        match self {
            Figure::MigrationsPerKilotick => f.migrations_per_kilotick,
            Figure::MigrationsPerCrossing => f.migrations_per_crossing,
            Figure::ForwardedPerKilotick => f.forwarded_per_kilotick,
            Figure::GhostsCreatedPerKilotick => f.ghosts_created_per_kilotick,
            Figure::GhostSyncsPerKilotick => f.ghost_syncs_per_kilotick,
            Figure::ViewBytesPerClientS => f.view_bytes_per_client_s,
            Figure::ViewUpdatesPerClientS => f.view_updates_per_client_s,
            Figure::LoadSpread => f.load_spread_mean,
        }
    }

    /// The axis label.
    pub fn label(self) -> &'static str {
        match self {
            Figure::MigrationsPerKilotick => "migrations per 1,000 ticks",
            Figure::MigrationsPerCrossing => "migrations per crossing",
            Figure::ForwardedPerKilotick => "forwards per 1,000 ticks",
            Figure::GhostsCreatedPerKilotick => "ghosts created per 1,000 ticks",
            Figure::GhostSyncsPerKilotick => "ghost syncs per 1,000 ticks",
            Figure::ViewBytesPerClientS => "view bytes per client per second",
            Figure::ViewUpdatesPerClientS => "view updates per client per second",
            Figure::LoadSpread => "load spread (busiest shard / mean)",
        }
    }
}

/// Why a chart could not be written.
#[derive(Debug, thiserror::Error)]
#[error("drawing {file}: {reason}")]
pub struct ChartError {
    /// The file.
    pub file: String,
    /// What plotters said.
    pub reason: String,
}

/// One point: the value as typed, and its figures.
pub struct Point<'a> {
    /// The value as given on the command line.
    pub value: &'a str,
    /// What its runs measured.
    pub figures: &'a Figures,
}

/// Draws `figure` against the values of `key` into `file` (PNG). Values
/// that all parse as numbers are placed by value; otherwise one slot each,
/// in the given order. A value whose runs broke an invariant is drawn as a
/// red cross instead of a blue dot.
///
/// # Errors
/// [`ChartError`] if the file cannot be drawn or written.
pub fn draw(
    file: &Path,
    key: &str,
    figure: Figure,
    points: &[Point<'_>],
) -> Result<(), ChartError> {
    static FONT_ONCE: Once = Once::new();
    FONT_ONCE.call_once(|| {
        // The embedded font always parses; a failure only loses labels.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
    draw_inner(file, key, figure, points).map_err(|e| ChartError {
        file: file.display().to_string(),
        reason: e.to_string(),
    })
}

fn draw_inner(
    file: &Path,
    key: &str,
    figure: Figure,
    points: &[Point<'_>],
) -> Result<(), Box<dyn std::error::Error>> {
    let numeric: Option<Vec<f64>> = points.iter().map(|p| p.value.parse().ok()).collect();
    let xs: Vec<f64> = numeric.unwrap_or_else(|| (0..points.len()).map(|i| i as f64).collect());
    let labels: Vec<String> = points.iter().map(|p| p.value.to_owned()).collect();
    let ys: Vec<f64> = points.iter().map(|p| figure.of(p.figures)).collect();
    let (x_lo, x_hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let pad = ((x_hi - x_lo) * 0.08).max(0.5);
    let y_max = ys.iter().copied().fold(0.0_f64, f64::max).max(1e-9) * 1.15;
    let root = BitMapBackend::new(file, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{} against {key}", figure.label()), (FONT, 22))
        .margin(14)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((x_lo - pad)..(x_hi + pad), 0.0..y_max)?;
    let slots = xs.clone();
    let label_of = move |x: &f64| {
        slots
            .iter()
            .position(|s| (s - x).abs() < 1e-9)
            .map_or_else(String::new, |i| labels[i].clone())
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(key)
        .y_desc(figure.label())
        .label_style((FONT, 14))
        .disable_x_mesh();
    if numeric_positions(points) {
        mesh.draw()?;
    } else {
        mesh.x_labels(points.len())
            .x_label_formatter(&label_of)
            .draw()?;
    }
    let line: Vec<(f64, f64)> = xs.iter().copied().zip(ys.iter().copied()).collect();
    chart.draw_series(LineSeries::new(line.clone(), BLUE.stroke_width(2)))?;
    for (p, &(x, y)) in points.iter().zip(&line) {
        if p.figures.violations == 0 {
            chart.draw_series(std::iter::once(Circle::new((x, y), 6, BLUE.filled())))?;
        } else {
            chart.draw_series(std::iter::once(Cross::new((x, y), 8, RED.stroke_width(3))))?;
        }
    }
    root.present()?;
    Ok(())
}

fn numeric_positions(points: &[Point<'_>]) -> bool {
    points.iter().all(|p| p.value.parse::<f64>().is_ok())
}
