//! Output: markdown tables, JSON files and SVG plots (progress bars are
//! `progress.rs`).

use std::path::Path;

use plotters::prelude::*;

use crate::eval::Report;

/// A metric as a table cell: three decimals, or `–` when there is none.
pub(crate) fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"))
}

/// A markdown table: one row per ranker and group, the given metric
/// columns, then abstention accuracy and knowledge-update newest-first.
pub fn markdown(reports: &[Report], metrics: &[String]) -> String {
    let mut out = String::new();
    out.push_str("| ranker | group | n |");
    for m in metrics {
        out.push_str(&format!(" {m} |"));
    }
    out.push_str(" abstention acc | KU newest-first |\n|---|---|---:|");
    for _ in metrics {
        out.push_str("---:|");
    }
    out.push_str("---:|---:|\n");
    for r in reports {
        let mut groups: Vec<_> = r.groups.iter().collect();
        // Overall last, after the groups.
        groups.sort_by_key(|(g, _)| (g.as_str() == crate::metrics::OVERALL, g.to_string()));
        for (group, s) in groups {
            let overall = group == crate::metrics::OVERALL;
            out.push_str(&format!("| {} | {} | {} |", r.ranker, group, s.n));
            for m in metrics {
                out.push_str(&format!(" {} |", cell(s.means.get(m).copied())));
            }
            if overall {
                out.push_str(&format!(
                    " {} | {} |\n",
                    cell(r.abstention_accuracy),
                    cell(r.ku_newest_first)
                ));
            } else {
                out.push_str(" | |\n");
            }
        }
    }
    out
}

/// Writes `value` as pretty JSON.
pub fn write_json(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)?)?;
    Ok(())
}

/// The markdown file written next to a JSON file (`x.json` → `x.md`).
pub fn markdown_path(json: &Path) -> std::path::PathBuf {
    json.with_extension("md")
}

/// One line of a plot: a name and its (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

/// Draws `series` as lines with markers into an SVG file.
pub fn plot(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> anyhow::Result<()> {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        anyhow::bail!("nothing to plot for {title}");
    }
    if x0 == x1 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let pad = ((y1 - y0) * 0.1).max(1e-3);
    let (y0, y1) = (y0 - pad, y1 + pad);
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60);
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for (i, (name, pts)) in series.iter().enumerate() {
                let color = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }};
    }
    if log_x {
        draw!(
            builder
                .build_cartesian_2d((x0.max(1e-9)..x1).log_scale(), y0..y1)
                .map_err(|e| anyhow::anyhow!("{e}"))?
        );
    } else {
        draw!(
            builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| anyhow::anyhow!("{e}"))?
        );
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
