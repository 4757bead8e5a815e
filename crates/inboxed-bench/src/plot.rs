//! Line charts as SVG, drawn by the suite itself so that docs/bench/runs.md's plots come from the
//! same run as its tables. Scenarios print their points as `plot<TAB>chart<TAB>series<TAB>x<TAB>y`
//! lines, which `inboxed-bench all` collects; nothing else reads them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One chart: its series, each a list of (x, y) points, in the order first seen.
#[derive(Debug, Default)]
pub(crate) struct Chart {
    pub(crate) series: Vec<(String, Vec<(f64, f64)>)>,
}

impl Chart {
    fn add(&mut self, series: &str, x: f64, y: f64) {
        match self.series.iter_mut().find(|(name, _)| name == series) {
            Some((_, points)) => points.push((x, y)),
            None => self.series.push((series.to_owned(), vec![(x, y)])),
        }
    }
}

/// Prints one point for `inboxed-bench all` to collect.
pub(crate) fn point(chart: &str, series: &str, x: f64, y: f64) {
    println!("plot\t{chart}\t{series}\t{x}\t{y}");
}

/// The charts in `output`'s plot lines, by name.
pub(crate) fn collect(output: &str) -> BTreeMap<String, Chart> {
    let mut charts: BTreeMap<String, Chart> = BTreeMap::new();
    for line in output.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        if let ["plot", chart, series, x, y] = fields[..]
            && let (Ok(x), Ok(y)) = (x.parse(), y.parse())
        {
            charts
                .entry(chart.to_owned())
                .or_default()
                .add(series, x, y);
        }
    }
    charts
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];
const W: f64 = 800.0;
const H: f64 = 420.0;
const LEFT: f64 = 80.0;
/// Room for the legend.
const RIGHT: f64 = 280.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// The largest "round" number at or above `v`: 1, 2 or 5 times a power of ten.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

/// Renders `chart` with `title`; `log_x` spaces x by its logarithm (batch sizes, say).
pub(crate) fn svg(chart: &Chart, title: &str, x_label: &str, y_label: &str, log_x: bool) -> String {
    let xs = chart.series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
    let tx = |x: f64| if log_x { x.max(1e-9).log10() } else { x };
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    for x in xs {
        x0 = x0.min(tx(x));
        x1 = x1.max(tx(x));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y_max = chart
        .series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max);
    let y1 = nice_ceiling(y_max);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |x: f64| LEFT + (tx(x) - x0) / (x1 - x0) * pw;
    let py = |y: f64| TOP + ph - y / y1 * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>
<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="black"/>
<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="black"/>
"#,
        LEFT + pw / 2.0,
        escape(title),
        TOP + ph,
        LEFT + pw,
        TOP + ph,
        TOP + ph
    );
    for i in 0..=5 {
        let y = y1 * f64::from(i) / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ddd"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            py(y),
            LEFT + pw,
            LEFT - 6.0,
            py(y) + 4.0,
            thousands(y)
        );
    }
    let mut ticks: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for x in ticks {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            px(x),
            TOP + ph + 16.0,
            thousands(x)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>
<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 12.0,
        escape(x_label),
        TOP + ph / 2.0,
        escape(y_label)
    );
    for (i, (name, points)) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{ly:.1}" x2="{1:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"/><text x="{2:.1}" y="{3:.1}">{4}</text>"#,
            W - RIGHT + 10.0,
            W - RIGHT + 30.0,
            W - RIGHT + 36.0,
            ly + 4.0,
            escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// `12345.6` as `12,346`.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.round());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 && c != '-' {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
