//! Order statistics over measured durations, and the unit formatting the
//! report uses.
//!
//! Owns: percentiles (nearest-rank), the median, and human-readable
//! duration / size strings. Must not: measure anything or know about servers.

use std::time::Duration;

/// A summary of a set of latency samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LatencySummary {
    /// How many samples the summary covers.
    pub samples: usize,
    /// 50th percentile (nearest rank).
    pub p50: Duration,
    /// 99th percentile (nearest rank).
    pub p99: Duration,
    /// Arithmetic mean.
    pub mean: Duration,
    /// Smallest sample.
    pub min: Duration,
    /// Largest sample.
    pub max: Duration,
}

impl LatencySummary {
    /// Summarises `samples`; `None` when there are none.
    pub(crate) fn from_samples(mut samples: Vec<Duration>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let total: Duration = samples.iter().sum();
        let count = u32::try_from(samples.len()).unwrap_or(u32::MAX);
        Some(Self {
            samples: samples.len(),
            p50: nearest_rank(&samples, 50.0),
            p99: nearest_rank(&samples, 99.0),
            mean: total / count,
            min: samples[0],
            max: samples[samples.len() - 1],
        })
    }

    /// The summary as JSON, durations in microseconds.
    pub(crate) fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "samples": self.samples,
            "p50_us": micros(self.p50),
            "p99_us": micros(self.p99),
            "mean_us": micros(self.mean),
            "min_us": micros(self.min),
            "max_us": micros(self.max),
        })
    }
}

/// Nearest-rank percentile of an ascending, non-empty slice.
pub(crate) fn nearest_rank(sorted: &[Duration], percentile: f64) -> Duration {
    debug_assert!(!sorted.is_empty());
    let n = sorted.len();
    // Smallest rank r (1-based) with r / n >= percentile / 100.
    let rank = ((percentile / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// Conventional median of an ascending, non-empty slice (mean of the two
/// middle samples when the count is even).
pub(crate) fn median(sorted: &[Duration]) -> Duration {
    debug_assert!(!sorted.is_empty());
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }
}

/// A duration as fractional microseconds, for JSON.
pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A duration with a unit chosen by magnitude, three significant digits.
pub(crate) fn fmt_duration(d: Duration) -> String {
    let us = micros(d);
    if us < 1_000.0 {
        format!("{} µs", sig3(us))
    } else if us < 1_000_000.0 {
        format!("{} ms", sig3(us / 1e3))
    } else {
        format!("{} s", sig3(us / 1e6))
    }
}

/// A size given in KiB, shown in MiB.
pub(crate) fn fmt_kib(kib: u64) -> String {
    format!("{} MiB", sig3(kib as f64 / 1024.0))
}

/// A count with thousands separators (`10000` → `10,000`).
pub(crate) fn fmt_count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Three significant digits, no exponent.
fn sig3(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(nearest_rank(&sorted, 50.0), ms(50));
        assert_eq!(nearest_rank(&sorted, 99.0), ms(99));
        assert_eq!(nearest_rank(&sorted, 100.0), ms(100));
        assert_eq!(nearest_rank(&[ms(7)], 99.0), ms(7));
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&[ms(1), ms(2), ms(9)]), ms(2));
        assert_eq!(median(&[ms(1), ms(3)]), ms(2));
    }

    #[test]
    fn summary_of_unsorted_samples() {
        let s = LatencySummary::from_samples(vec![ms(3), ms(1), ms(2)]).expect("non-empty");
        assert_eq!((s.min, s.p50, s.max, s.mean), (ms(1), ms(2), ms(3), ms(2)));
        assert!(LatencySummary::from_samples(Vec::new()).is_none());
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_duration(Duration::from_nanos(45_600)), "45.6 µs");
        assert_eq!(fmt_duration(ms(180)), "180 ms");
        assert_eq!(fmt_duration(Duration::from_millis(2_500)), "2.50 s");
        assert_eq!(fmt_kib(51_200), "50.0 MiB");
        assert_eq!(fmt_count(100_000), "100,000");
        assert_eq!(fmt_count(999), "999");
    }
}
