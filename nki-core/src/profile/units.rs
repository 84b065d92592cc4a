//! Human-readable byte counts and durations, shared by the text summary, the HTML page and
//! the sweep table.

/// `b` bytes with a decimal unit: `1.23 GB`, `4.56 MB`, `7.8 KB`, `12 B`.
pub(crate) fn human_bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// `ns` nanoseconds in the largest unit that keeps the number at least 1: `1.234 ms`,
/// `5.67 us`, `89 ns`.
pub(crate) fn human_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_switch_at_each_power_of_a_thousand() {
        assert_eq!(human_bytes(999.0), "999 B");
        assert_eq!(human_bytes(1_500.0), "1.5 KB");
        assert_eq!(human_bytes(2_500_000.0), "2.50 MB");
        assert_eq!(human_bytes(3e9), "3.00 GB");
        assert_eq!(human_ns(12.0), "12 ns");
        assert_eq!(human_ns(1_234.0), "1.23 us");
        assert_eq!(human_ns(2_500_000.0), "2.500 ms");
    }
}
