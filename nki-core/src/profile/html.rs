//! One self-contained HTML page for a [`Profile`]: the engine timeline (inline SVG), the
//! utilisation per engine, what bounds the kernel and the top source lines. No script, no
//! style sheet or font from elsewhere: the page opens offline in any browser.

use super::summary::{Profile, Track};
use super::units::{human_bytes, human_ns};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Width of the timeline drawing, in SVG units.
const WIDTH: f64 = 1100.0;
/// Height of one timeline row.
const ROW: f64 = 18.0;
/// Width of the row labels.
const LABEL: f64 = 190.0;
/// Spans drawn per row at most: shorter spans are merged into pixel-wide runs beyond that.
const PIXELS: usize = 1100;

impl Profile {
    /// Writes [`Profile::to_html`] to `path`.
    pub fn write_html(&self, path: impl AsRef<Path>) -> io::Result<()> {
        crate::files::write(path.as_ref(), "the HTML report", self.to_html())
    }

    /// The profile as one self-contained HTML page (no network, no scripts): the engine
    /// timeline of every NeuronCore (one row per engine, DMA engine and stall track; each
    /// row drawn at pixel resolution), the utilisation per engine, the bottleneck split and
    /// the top source lines.
    pub fn to_html(&self) -> String {
        let mut h = String::with_capacity(64 * 1024);
        let title = format!(
            "nki-rs profile: {} on {}",
            human_ns(self.latency_ns),
            self.target
        );
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>{}</title><style>{}</style></head><body>\n<h1>{}</h1>\n",
            esc(&title),
            STYLE,
            esc(&title)
        );
        // TensorE's utilisation only for a kernel that used TensorE.
        let tensor_e = if self.uses_tensor_engine() {
            format!(
                "HFU {:.2}%, MFU {:.2}%; ",
                self.hfu_percent, self.mfu_percent
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            h,
            "<p>latency {} = active {} + pre/postamble {}; {} instructions on {} NeuronCore{}; \
             {tensor_e}DMA {} in {} transfers; SBUF peak {} B/partition.</p>",
            human_ns(self.latency_ns),
            human_ns(self.active_ns),
            human_ns(self.launch_overhead_ns),
            self.instructions,
            self.cores.len(),
            if self.cores.len() == 1 { "" } else { "s" },
            human_bytes(self.dma.bytes as f64),
            self.dma.count,
            self.memory.sbuf_bytes_per_partition
        );
        self.html_bounds(&mut h);
        self.html_performance_bounds(&mut h);
        self.html_advice(&mut h);
        self.html_engines(&mut h);
        self.html_timeline(&mut h);
        self.html_lines(&mut h);
        h.push_str("</body></html>\n");
        h
    }

    fn html_bounds(&self, h: &mut String) {
        h.push_str("<h2>What bounds the kernel (critical path)</h2>\n<div class=\"stack\">");
        for (k, b) in self.bounds.iter().enumerate() {
            let _ = write!(
                h,
                "<div style=\"width:{:.3}%;background:{}\" title=\"{}\"></div>",
                b.percent.clamp(0.0, 100.0),
                PALETTE[k % PALETTE.len()],
                esc(&b.to_string())
            );
        }
        h.push_str("</div>\n<table><tr><th></th><th>bound</th><th>time</th><th>share</th></tr>\n");
        for (k, b) in self.bounds.iter().enumerate() {
            let _ = writeln!(
                h,
                "<tr><td><span class=\"key\" style=\"background:{}\"></span></td><td>{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{:.1}%</td></tr>",
                PALETTE[k % PALETTE.len()],
                esc(&b.bound.to_string()),
                human_ns(b.ns),
                b.percent
            );
        }
        h.push_str("</table>\n");
    }

    fn html_advice(&self, h: &mut String) {
        let advice = self.advice();
        if advice.is_empty() {
            return;
        }
        h.push_str("<h2>Next steps</h2>\n<ul>\n");
        for a in &advice {
            let _ = writeln!(h, "<li>{}</li>", esc(&a.message));
        }
        h.push_str("</ul>\n");
    }

    fn html_performance_bounds(&self, h: &mut String) {
        let b = self.bounds();
        let _ = writeln!(
            h,
            "<h2>Performance bounds</h2>\n<p>DMA peak {:.0} GB/s, TensorE peak {:.1} TFLOPS; \
             {} moved, {} ideally (each input read once, each output written once); {:.3} \
             GFLOP adjusted.</p>\n<table><tr><th>bound</th><th>time</th><th colspan=\"2\">\
             of active time</th></tr>",
            b.dma_peak_gbps,
            b.tensor_peak_tflops,
            human_bytes(b.bytes_moved as f64),
            human_bytes(b.bytes_ideal as f64),
            b.useful_flops_adjusted / 1e9
        );
        for r in &b.table {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}%</td>\
                 <td><div class=\"bar\"><div style=\"width:{:.2}%\"></div></div></td></tr>",
                esc(r.name),
                human_ns(r.ns),
                r.percent_of_active,
                r.percent_of_active.clamp(0.0, 100.0)
            );
        }
        h.push_str("</table>\n");
        if b.findings.is_empty() {
            return;
        }
        h.push_str(
            "<table><tr><th>finding</th><th>line</th><th>api</th><th>instructions</th>\
             <th>bytes</th><th>detail</th></tr>\n",
        );
        for x in &b.findings {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{}</td></tr>",
                esc(x.kind.name()),
                esc(&x.location),
                esc(x.api),
                x.count,
                human_bytes(x.bytes as f64),
                esc(&x.detail)
            );
        }
        h.push_str("</table>\n");
    }

    fn html_engines(&self, h: &mut String) {
        h.push_str(
            "<h2>Utilisation per engine</h2>\n<table><tr><th>engine</th><th>instructions</th>\
             <th>active</th><th colspan=\"2\">active %</th></tr>\n",
        );
        for e in self.engines.iter().filter(|e| e.instructions > 0) {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{:.1}%</td><td><div class=\"bar\"><div style=\"width:{:.2}%\">\
                 </div></div></td></tr>",
                esc(&e.engine),
                e.instructions,
                human_ns(e.active_ns),
                e.active_percent,
                e.active_percent.clamp(0.0, 100.0)
            );
        }
        h.push_str("</table>\n");
    }

    fn html_timeline(&self, h: &mut String) {
        // Rows: per core, per track, the spans merged at pixel resolution.
        let end = self
            .spans
            .iter()
            .map(|s| s.start_ns + s.dur_ns)
            .fold(0.0f64, f64::max)
            .max(1.0);
        let scale = (WIDTH - LABEL) / end;
        let mut rows: BTreeMap<(u16, u32, Track), Vec<(f64, f64)>> = BTreeMap::new();
        for s in &self.spans {
            rows.entry((s.nc, track_order(s.track), s.track))
                .or_default()
                .push((s.start_ns, s.start_ns + s.dur_ns));
        }
        let height = ROW * (rows.len() as f64 + 1.5);
        let _ = write!(
            h,
            "<h2>Timeline</h2>\n<p>{} spans over {}; each row at pixel resolution \
             (hover a bar for its interval).</p>\n<svg xmlns=\"http://www.w3.org/2000/svg\" \
             width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\">\n",
            self.spans.len(),
            human_ns(end)
        );
        let px = end / PIXELS as f64;
        for (row, ((nc, _, track), mut iv)) in rows.into_iter().enumerate() {
            let y = row as f64 * ROW;
            let label = if self.cores.len() > 1 {
                format!("nc{nc} {}", track.name())
            } else {
                track.name()
            };
            let _ = writeln!(
                h,
                "<text x=\"4\" y=\"{:.1}\" class=\"lbl\">{}</text>",
                y + ROW * 0.72,
                esc(&label)
            );
            iv.sort_by(|a, b| a.0.total_cmp(&b.0));
            let colour = track_colour(track);
            // Merge intervals closer than a pixel, so a row draws at most ~PIXELS rects.
            let mut cur: Option<(f64, f64)> = None;
            let draw = |h: &mut String, (s, e): (f64, f64)| {
                let _ = writeln!(
                    h,
                    "<rect x=\"{:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{colour}\">\
                     <title>{} .. {}</title></rect>",
                    LABEL + s * scale,
                    y + 2.0,
                    ((e - s) * scale).max(0.5),
                    ROW - 4.0,
                    human_ns(s),
                    human_ns(e)
                );
            };
            for (s, e) in iv {
                cur = match cur {
                    Some((cs, ce)) if s <= ce + px => Some((cs, ce.max(e))),
                    Some(c) => {
                        draw(h, c);
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            if let Some(c) = cur {
                draw(h, c);
            }
        }
        // Time axis.
        let y = height - ROW * 0.5;
        for k in 0..=4 {
            let t = end * k as f64 / 4.0;
            let _ = writeln!(
                h,
                "<text x=\"{:.1}\" y=\"{y:.1}\" class=\"axis\">{}</text>",
                LABEL + t * scale - if k == 4 { 40.0 } else { 0.0 },
                human_ns(t)
            );
        }
        h.push_str("</svg>\n");
    }

    fn html_lines(&self, h: &mut String) {
        h.push_str(
            "<h2>Top source lines</h2>\n<table><tr><th>critical path</th><th>share</th>\
             <th>busy</th><th>instructions</th><th>call</th><th>engine</th><th>DMA bytes</th>\
             <th>DMA engine time</th><th>line</th></tr>\n",
        );
        for l in &self.top_lines {
            let (bytes, eng) = if l.bytes > 0 {
                (human_bytes(l.bytes as f64), human_ns(l.dma_engine_ns))
            } else {
                (String::new(), String::new())
            };
            let _ = writeln!(
                h,
                "<tr><td class=\"n\">{}</td><td class=\"n\">{:.1}%</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td><code>{}</code></td></tr>",
                human_ns(l.time_ns),
                l.percent,
                human_ns(l.busy_ns),
                l.instructions,
                esc(l.api),
                esc(l.engine),
                bytes,
                eng,
                esc(&l.location)
            );
        }
        h.push_str("</table>\n");
    }
}

/// Row order within a core: compute engines, their stalls, DMA engines, DMA queues, launch.
fn track_order(t: Track) -> u32 {
    match t {
        Track::LoadStationary => 0,
        Track::MultiplyMoving => 1,
        Track::Vector => 2,
        Track::Scalar => 3,
        Track::GpSimd => 4,
        Track::Sync => 5,
        Track::Stall(e) => 10 + e.index() as u32,
        Track::DmaEngine(e) => 100 + e as u32,
        Track::DmaQueue(q) => 1000 + q as u32,
        Track::Launch => 100_000,
    }
}

fn track_colour(t: Track) -> &'static str {
    match t {
        Track::LoadStationary | Track::MultiplyMoving => "#2b6cb0",
        Track::Vector => "#2f855a",
        Track::Scalar => "#b7791f",
        Track::GpSimd => "#805ad5",
        Track::Sync => "#718096",
        Track::Stall(_) => "#e53e3e",
        Track::DmaEngine(_) => "#dd6b20",
        Track::DmaQueue(_) => "#d69e2e",
        Track::Launch => "#a0aec0",
    }
}

const PALETTE: [&str; 8] = [
    "#2b6cb0", "#dd6b20", "#2f855a", "#e53e3e", "#805ad5", "#b7791f", "#718096", "#319795",
];

const STYLE: &str = "body{font-family:sans-serif;margin:20px;color:#1a202c;background:#fff}\
h1{font-size:20px}h2{font-size:16px;margin-top:24px}\
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #e2e8f0;font-size:13px}\
td.n{text-align:right;font-variant-numeric:tabular-nums}\
.stack{display:flex;width:900px;height:22px;border:1px solid #cbd5e0;margin-bottom:8px}\
.key{display:inline-block;width:12px;height:12px}\
.bar{width:300px;height:12px;background:#edf2f7}.bar div{height:12px;background:#2b6cb0}\
svg{border:1px solid #cbd5e0;background:#f7fafc}.lbl{font-size:11px}.axis{font-size:11px;fill:#4a5568}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    /// Two small DMAs (8-byte rows) and one large one per instance, then VectorE adds.
    #[nki_kernel]
    fn mixed(a: &Hbm<f32>, small: &Hbm<f32>, out: &mut Hbm<f32>) {
        let i = nl::program_id(0) * 128;
        let big = nl::load(a.slice((i..i + 128, ..))); // [128, 256] f32: 128 KiB
        let s1 = nl::load(small.slice((i..i + 128, 0..2))); // 1 KiB (whole 8-byte words)
        let s2 = nl::load(small.slice((i..i + 128, 2..4)));
        let (s1, s2) = (
            nl::copy(s1.slice((.., 0..1)), None),
            nl::copy(s2.slice((.., 1..2)), None),
        );
        let t = &(&big + &s1) + &s2;
        nl::store(out.slice((i..i + 128, ..)), &t);
    }

    fn profile() -> Profile {
        let a = Hbm::<f32>::shape_only([512, 256]);
        let small = Hbm::<f32>::shape_only([512, 4]);
        let mut out = Hbm::<f32>::shape_only([512, 256]);
        mixed::estimate(4, Target::Trn2, &a, &small, &mut out).unwrap()
    }

    #[test]
    fn top_lines_share_the_critical_path_and_tell_dma_sizes_apart() {
        let p = profile();
        let total: f64 = p.top_lines.iter().map(|l| l.percent).sum();
        assert!(total > 0.0 && total <= 100.0 + 1e-9, "{total}");
        let sum_ns: f64 = p.top_lines.iter().map(|l| l.time_ns).sum();
        assert!(sum_ns <= p.active_ns + 1e-6);
        let dma: Vec<_> = p.top_lines.iter().filter(|l| l.engine == "DMA").collect();
        let big = dma.iter().max_by_key(|l| l.bytes).unwrap();
        let small = dma.iter().min_by_key(|l| l.bytes).unwrap();
        assert_eq!(big.bytes, 4 * 128 * 256 * 4);
        assert_eq!(small.bytes, 4 * 128 * 8);
        assert!(
            big.dma_engine_ns > 2.0 * small.dma_engine_ns,
            "big {} vs small {}",
            big.dma_engine_ns,
            small.dma_engine_ns
        );
        // Busy time keeps the old sum of durations (queued DMAs add up).
        assert!(dma.iter().all(|l| l.busy_ns > 0.0));
        let text = p.to_string();
        assert!(text.contains("critical path"), "{text}");
    }

    #[test]
    fn the_html_page_is_self_contained_and_has_every_part() {
        let p = profile();
        let h = p.to_html();
        assert!(h.starts_with("<!DOCTYPE html>"));
        for part in [
            "What bounds the kernel",
            "Performance bounds",
            "memory_bound_ideal",
            "Utilisation per engine",
            "Timeline",
            "Top source lines",
            "<svg",
            "<rect",
            "VectorE",
            "DMA engine 0",
        ] {
            assert!(h.contains(part), "missing {part}");
        }
        assert!(!h.contains("<script"), "no scripts");
        assert!(!h.contains("src=\""), "nothing loaded from elsewhere");
        assert!(!h.contains("<link"), "no external style sheets");
        let path = std::env::temp_dir().join(format!("nki-html-{}.html", std::process::id()));
        p.write_html(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), h);
        let _ = std::fs::remove_file(&path);
    }
}
