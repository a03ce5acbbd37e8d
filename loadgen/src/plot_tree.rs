//! `tree.png` (`--plot DIR`): the embedded server's cell tree over the run,
//! from the snapshots shard 0 publishes every balancing period.
//!
//! Owns one chart: six small multiples of the tree at evenly spaced moments
//! (each cell a rect filled by its load, outlined in its shard's colour,
//! labelled with its id, shard and reals), above a line chart of the cell
//! count, the hottest cell's load and the hottest shard's tick p99 (each
//! second, against the tick budget) over time. Reads snapshots and the
//! run's series only; must not touch the server.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use tessera::server::balance::TreeSnapshot;

use crate::plot::{register_font, FONT};

const SIZE: (u32, u32) = (1500, 1150);
/// Small multiples drawn.
const PANELS: usize = 6;
const SHARD_COLOURS: [RGBColor; 4] = [BLUE, RED, GREEN, MAGENTA];

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Writes `tree.png` into `dir` from `(seconds, snapshot)` pairs (oldest
/// first); returns its path.
///
/// # Errors
/// If the chart cannot be drawn.
pub fn write(dir: &Path, tree: &[(f64, TreeSnapshot)], ticks: &Ticks) -> anyhow::Result<PathBuf> {
    register_font();
    let file = dir.join("tree.png");
    draw(&file, tree, ticks).map_err(|e| anyhow::anyhow!("drawing tree.png: {e}"))?;
    Ok(file)
}

/// The hottest shard's tick work over the run, for the bottom chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ticks {
    /// `(seconds, the hottest shard's tick p99 that second, ms)`.
    pub hottest_ms: Vec<(f64, f64)>,
    /// The tick budget, ms (0: not drawn).
    pub budget_ms: f64,
}

impl Ticks {
    /// From the run's series and the tick budget.
    pub fn of(series: &[crate::report::Sample], budget_ms: f64) -> Ticks {
        let hottest_ms = series
            .iter()
            .filter_map(|s| {
                let h = s.shard_tick_p99_ms.iter().copied().reduce(f64::max)?;
                Some((s.t_s, h))
            })
            .collect();
        Ticks {
            hottest_ms,
            budget_ms,
        }
    }
}

/// The snapshots shown: `PANELS` evenly spaced over the run, the last
/// included (fewer when there are fewer snapshots).
pub fn picks(n: usize) -> Vec<usize> {
    if n <= PANELS {
        return (0..n).collect();
    }
    (0..PANELS).map(|k| k * (n - 1) / (PANELS - 1)).collect()
}

/// White (idle) to red (the run's hottest cell) for `load / max`.
fn heat(load: f64, max: f64) -> RGBColor {
    let f = if max > 0.0 {
        (load / max).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let g = (255.0 * (1.0 - f)) as u8;
    RGBColor(255, g, g)
}

fn draw(file: &Path, tree: &[(f64, TreeSnapshot)], ticks: &Ticks) -> DrawResult {
    let root = BitMapBackend::new(file, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(850);
    let max_load = tree
        .iter()
        .flat_map(|(_, s)| s.leaves.iter().map(|l| l.load))
        .fold(0.0, f64::max);
    let panels = top.split_evenly((2, 3));
    for (panel, &i) in panels.iter().zip(picks(tree.len()).iter()) {
        let (t, snap) = &tree[i];
        panel_chart(panel, *t, snap, max_load)?;
    }
    count_chart(&bottom, tree, ticks)?;
    root.present()?;
    Ok(())
}

fn bounds(snap: &TreeSnapshot) -> (f64, f64, f64, f64) {
    snap.leaves.iter().fold(
        (f64::MAX, f64::MAX, f64::MIN, f64::MIN),
        |(a, b, c, d), l| {
            (
                a.min(l.min_x),
                b.min(l.min_z),
                c.max(l.max_x),
                d.max(l.max_z),
            )
        },
    )
}

fn panel_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    t: f64,
    snap: &TreeSnapshot,
    max_load: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (x0, z0, x1, z1) = bounds(snap);
    let total: u32 = snap.leaves.iter().map(|l| l.reals).sum();
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "t={t:.0}s v{} cells={} reals={total}",
                snap.version,
                snap.leaves.len()
            ),
            (FONT, 17),
        )
        .margin(8)
        .x_label_area_size(22)
        .y_label_area_size(40)
        .build_cartesian_2d(x0..x1, z0..z1)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .label_style((FONT, 11))
        .draw()?;
    for l in &snap.leaves {
        let fill = heat(l.load, max_load);
        let edge = SHARD_COLOURS[usize::from(l.shard) % SHARD_COLOURS.len()];
        let rect = [(l.min_x, l.min_z), (l.max_x, l.max_z)];
        chart.draw_series([Rectangle::new(rect, fill.filled())])?;
        chart.draw_series([Rectangle::new(rect, edge.stroke_width(3))])?;
        let density = f64::from(l.reals) / ((l.max_x - l.min_x) * (l.max_z - l.min_z)) * 1e4;
        let label = format!(
            "c{} s{}{}\n{} reals {:.0}/ha\nload {:.2}",
            l.cell,
            l.shard,
            if l.merging { " merging" } else { "" },
            l.reals,
            density,
            l.load
        );
        let at = (l.min_x + 0.04 * (x1 - x0), l.max_z - 0.04 * (z1 - z0));
        for (k, line) in label.lines().enumerate() {
            let pos = (at.0, at.1 - k as f64 * 0.06 * (z1 - z0));
            chart.draw_series([Text::new(line.to_owned(), pos, (FONT, 12).into_font())])?;
        }
    }
    Ok(())
}

fn count_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    tree: &[(f64, TreeSnapshot)],
    ticks: &Ticks,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let t_max = tree.last().map_or(1.0, |(t, _)| t.max(1.0));
    let n_max = tree.iter().map(|(_, s)| s.leaves.len()).max().unwrap_or(1) as f64;
    let tick_max = ticks
        .hottest_ms
        .iter()
        .map(|p| p.1 / 10.0)
        .fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "cells (black), hottest cell load x10 (red), hottest shard tick p99 in 10 ms \
             (blue) and the tick budget (grey) over time",
            (FONT, 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..t_max, 0.0..(n_max + 1.0).max(10.0).max(tick_max * 1.1))?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .label_style((FONT, 12))
        .draw()?;
    let cells = tree.iter().map(|(t, s)| (*t, s.leaves.len() as f64));
    chart.draw_series(LineSeries::new(cells, BLACK.stroke_width(2)))?;
    let hot = tree.iter().map(|(t, s)| {
        (
            *t,
            10.0 * s.leaves.iter().map(|l| l.load).fold(0.0, f64::max),
        )
    });
    chart.draw_series(LineSeries::new(hot, RED.stroke_width(2)))?;
    let in_run = |&&(t, _): &&(f64, f64)| t <= t_max;
    let tick = ticks
        .hottest_ms
        .iter()
        .filter(in_run)
        .map(|&(t, ms)| (t, ms / 10.0));
    chart.draw_series(LineSeries::new(tick, BLUE.stroke_width(2)))?;
    if ticks.budget_ms > 0.0 {
        let b = ticks.budget_ms / 10.0;
        let grey = RGBColor(140, 140, 140);
        chart.draw_series(LineSeries::new(
            [(0.0, b), (t_max, b)],
            grey.stroke_width(2),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_are_spread_and_end_at_the_last() {
        assert_eq!(picks(3), vec![0, 1, 2]);
        let p = picks(101);
        assert_eq!(p.len(), PANELS);
        assert_eq!((p[0], p[PANELS - 1]), (0, 100));
        assert!(p.windows(2).all(|w| w[0] < w[1]));
    }
}
