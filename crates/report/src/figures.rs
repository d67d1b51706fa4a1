//! The single definitions of the figures every enforcer is judged by. The simulator,
//! the lab and the summaries all go through these, so a figure means the same thing
//! wherever it is printed.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Jain's fairness index, (Σx)² / (n·Σx²), in [1/n, 1].
///
/// Fed with throughput_i / ideal_i, 1.0 means exactly the policy whatever the weights.
/// An empty set, or one where every x is 0, counts as fair (1.0): nobody got more than
/// anybody else, and a figure that JSON can hold beats NaN. How far from the ideal the
/// shares are is rel_error's job, not this one's.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sum_squares: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sum_squares <= 0.0 {
        return 1.0;
    }
    // Rounding can push the ratio a hair above 1 for equal shares.
    (sum * sum / (xs.len() as f64 * sum_squares)).min(1.0)
}

/// |throughput - ideal| / ideal.
///
/// Only meaningful for ideal > 0; the summaries leave tenants without an ideal out,
/// and for them this returns 0 so that no caller ever carries a NaN or infinity along.
pub fn rel_error(throughput: f64, ideal: f64) -> f64 {
    if ideal > 0.0 {
        (throughput - ideal).abs() / ideal
    } else {
        0.0
    }
}

/// Quantiles written to latency.csv: 0, every percent, and the tail.
pub fn latency_quantiles() -> Vec<f64> {
    let mut quantiles: Vec<f64> = (0..100).map(|percent| f64::from(percent) / 100.0).collect();
    quantiles.extend([0.999, 0.9999, 1.0]);
    quantiles
}

/// Latency of one traffic in microseconds, as summary.json holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    /// The standard deviation: FlowValve's figure of delay variation. Absent from
    /// a summary written before it was kept, and read as 0.
    #[serde(default)]
    pub stdev_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl LatencySummary {
    pub fn from_histogram(histogram_ns: &Histogram<u64>) -> Self {
        let at = |quantile| latency_us_at(histogram_ns, quantile);
        Self {
            count: histogram_ns.len(),
            mean_us: histogram_ns.mean() / 1e3,
            stdev_us: histogram_ns.stdev() / 1e3,
            min_us: ns_to_us(histogram_ns.min()),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: ns_to_us(histogram_ns.max()),
        }
    }
}

/// Latency at `quantile` in microseconds; 0 for an empty histogram.
pub fn latency_us_at(histogram_ns: &Histogram<u64>, quantile: f64) -> f64 {
    if histogram_ns.is_empty() {
        0.0
    } else {
        ns_to_us(histogram_ns.value_at_quantile(quantile))
    }
}

fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// `value` with at most `decimals` decimals and no trailing zeros (`10`, `2.5`),
/// as an axis tick or a scale factor reads.
pub(crate) fn trimmed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_of_equal_shares_is_one() {
        assert_eq!(jain_index(&[0.7; 5]), 1.0);
        assert_eq!(jain_index(&[1.0]), 1.0);
    }

    #[test]
    fn jain_of_one_hog_is_one_over_n() {
        for n in 1..=10 {
            let mut xs = vec![0.0; n];
            xs[n / 2] = 3.0;
            assert!((jain_index(&xs) - 1.0 / n as f64).abs() < 1e-15, "n = {n}");
        }
    }

    #[test]
    fn jain_of_two_known_shares() {
        // (1 + 2)² / (2 · (1 + 4)) = 9 / 10.
        assert!((jain_index(&[1.0, 2.0]) - 0.9).abs() < 1e-15);
        // Shares 0.8 and 1.2 of the ideal: 4 / (2 · 2.08).
        assert!((jain_index(&[0.8, 1.2]) - 4.0 / 4.16).abs() < 1e-15);
    }

    #[test]
    fn jain_without_shares_is_fair_not_nan() {
        assert_eq!(jain_index(&[]), 1.0);
        assert_eq!(jain_index(&[0.0, 0.0]), 1.0);
    }

    #[test]
    fn rel_error_is_relative_to_the_ideal() {
        assert_eq!(rel_error(5e9, 5e9), 0.0);
        assert!((rel_error(4e9, 5e9) - 0.2).abs() < 1e-15);
        assert!((rel_error(6e9, 5e9) - 0.2).abs() < 1e-15);
        assert_eq!(rel_error(0.0, 2e9), 1.0);
        assert_eq!(rel_error(3e9, 0.0), 0.0);
    }

    #[test]
    fn quantiles_are_percents_then_tail() {
        let quantiles = latency_quantiles();
        assert_eq!(quantiles.len(), 103);
        assert_eq!(quantiles[0], 0.0);
        assert_eq!(quantiles[1], 0.01);
        assert_eq!(quantiles[50], 0.5);
        assert_eq!(quantiles[99], 0.99);
        assert_eq!(quantiles[100..], [0.999, 0.9999, 1.0]);
        assert!(quantiles.windows(2).all(|pair| pair[0] < pair[1]));
    }

    /// 1..=1000 ns: below 2048, a 3-digit histogram holds every value exactly.
    fn one_to_a_thousand_ns() -> Histogram<u64> {
        let mut histogram = Histogram::new(3).unwrap();
        for ns in 1..=1000 {
            histogram.record(ns).unwrap();
        }
        histogram
    }

    #[test]
    fn latency_summary_of_a_known_histogram() {
        let summary = LatencySummary::from_histogram(&one_to_a_thousand_ns());
        // The population standard deviation of 1..=n is sqrt((n² - 1) / 12).
        let stdev_us = (999_999.0f64 / 12.0).sqrt() / 1e3;
        assert!(
            (summary.stdev_us - stdev_us).abs() < 1e-9,
            "{}",
            summary.stdev_us
        );
        assert_eq!(
            summary,
            LatencySummary {
                count: 1000,
                mean_us: 0.5005,
                stdev_us: summary.stdev_us,
                min_us: 0.001,
                p50_us: 0.5,
                p90_us: 0.9,
                p99_us: 0.99,
                p999_us: 0.999,
                max_us: 1.0,
            }
        );
    }

    #[test]
    fn latency_at_quantile_of_a_known_histogram() {
        let histogram = one_to_a_thousand_ns();
        assert_eq!(latency_us_at(&histogram, 0.0), 0.001);
        assert_eq!(latency_us_at(&histogram, 0.25), 0.25);
        assert_eq!(latency_us_at(&histogram, 0.9999), 1.0);
        assert_eq!(latency_us_at(&histogram, 1.0), 1.0);
    }

    #[test]
    fn empty_histogram_gives_zeros() {
        let empty = Histogram::<u64>::new(3).unwrap();
        let summary = LatencySummary::from_histogram(&empty);
        assert_eq!(summary.count, 0);
        assert_eq!(summary.mean_us, 0.0);
        assert_eq!(summary.max_us, 0.0);
        assert_eq!(latency_us_at(&empty, 0.5), 0.0);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn jain_lies_between_one_over_n_and_one(
                xs in prop::collection::vec(0.0f64..1e12, 1..32),
            ) {
                let jain = jain_index(&xs);
                let n = xs.len() as f64;
                prop_assert!(jain <= 1.0);
                prop_assert!(jain >= 1.0 / n - 1e-12, "jain {jain} below 1/{n}");
            }

            #[test]
            fn jain_is_scale_invariant(
                xs in prop::collection::vec(1e-3f64..1e12, 1..32),
                scale in 1e-6f64..1e6,
            ) {
                let scaled: Vec<f64> = xs.iter().map(|x| x * scale).collect();
                prop_assert!((jain_index(&scaled) - jain_index(&xs)).abs() < 1e-9);
            }

            #[test]
            fn rel_error_is_scale_invariant_and_non_negative(
                throughput in 0.0f64..1e12,
                ideal in 1.0f64..1e12,
                scale in 1e-6f64..1e6,
            ) {
                let error = rel_error(throughput, ideal);
                prop_assert!(error >= 0.0);
                let scaled = rel_error(throughput * scale, ideal * scale);
                prop_assert!((scaled - error).abs() <= 1e-9 * error.max(1.0));
            }
        }
    }
}
