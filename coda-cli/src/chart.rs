//! The SVG chart of `coda bench`, drawn with plotters.

use coda_tests::suite::Row;

/// A bar chart of fused / cuBLASLt per row, with the 1.00 line, as SVG.
pub fn draw(rows: &[Row], title: &str) -> Result<String, String> {
    use plotters::prelude::*;
    let mut svg = String::new();
    {
        let width = (200 + 24 * rows.len()).max(1100) as u32;
        let root = SVGBackend::with_string(&mut svg, (width, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let top = rows.iter().map(Row::vs_cublas).fold(1.2f64, f64::max) * 1.1;
        let labels: Vec<String> = rows.iter().map(|r| format!("{} {}", r.name, r.shape)).collect();
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(190)
            .y_label_area_size(60)
            .build_cartesian_2d((0..rows.len()).into_segmented(), 0.0..top)
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(rows.len())
            .x_label_style(("sans-serif", 11).into_font().transform(FontTransform::Rotate90))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("fused / bare cuBLASLt GEMMs")
            .draw()
            .map_err(|e| e.to_string())?;
        c.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let color = if r.vs_cublas() <= 1.0 { GREEN.mix(0.8) } else { RED.mix(0.7) };
            Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), r.vs_cublas())], color.filled())
        }))
        .map_err(|e| e.to_string())?;
        c.draw_series(LineSeries::new([(SegmentValue::Exact(0), 1.0), (SegmentValue::Exact(rows.len()), 1.0)], BLACK.stroke_width(1)))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_svg_with_one_bar_per_row() {
        let rows = vec![
            Row { name: "gemm_swiglu".into(), shape: "M=4096 N=8192 K=4096".into(), gemms: "1".into(), fused_ms: 0.40, cublas_ms: 0.38, cutlass_ms: Some(0.41), note: String::new() },
            Row { name: "block fwd".into(), shape: "M=16384 d=2048 ffn=8192".into(), gemms: "4".into(), fused_ms: 2.7, cublas_ms: 3.0, cutlass_ms: None, note: String::new() },
        ];
        let svg = draw(&rows, "test").unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("gemm_swiglu M=4096 N=8192 K=4096") && svg.contains("block fwd"));
        // Bars: red above 1.00, green at or below.
        assert!(svg.contains("#FF0000") && svg.contains("#00FF00"), "bar colours");
    }
}
