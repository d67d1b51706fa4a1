//! Rates measured for feedback, per flow, over a window of epochs long enough to
//! hold several of the flow's bursts.
//!
//! A receiver that measured each flow over one epoch saw a TCP-like flow at
//! 150 Mbit/s as 516 Mbit/s in one millisecond and nothing in the next three: its
//! 64 KiB sends leave back to back. Fed back, those swings moved every other
//! flow's rate with them. The window reaches back, epoch by epoch, until it holds
//! [`RateWindow::WINDOW_BYTES`] of the flow, or [`RateWindow::EPOCHS_MAX`] epochs:
//! a fast flow is still measured over one epoch, a slow one over as many as it
//! takes to be measured at all.

use std::collections::VecDeque;

pub struct RateWindow {
    epoch_ns: u64,
    /// Per epoch, newest first, each flow's bytes.
    epochs: VecDeque<Vec<u64>>,
    current: Vec<u64>,
}

impl RateWindow {
    /// Eight sends of 64 KiB.
    pub const WINDOW_BYTES: u64 = 8 * 64 * 1024;
    pub const EPOCHS_MAX: usize = 64;

    pub fn new(flows: usize, epoch_ns: u64) -> RateWindow {
        RateWindow {
            epoch_ns,
            epochs: VecDeque::with_capacity(Self::EPOCHS_MAX),
            current: vec![0; flows],
        }
    }

    pub fn count(&mut self, flow: usize, bytes: u64) {
        self.current[flow] += bytes;
    }

    /// Ends the epoch and returns each flow's rate in bit/s over its window. A
    /// flow that has just started is measured over the epochs it has run
    /// (`epochs_running`), not diluted by the time before it.
    pub fn end_epoch(&mut self, epochs_running: impl Fn(usize) -> usize) -> Vec<f64> {
        let flows = self.current.len();
        let done = std::mem::replace(&mut self.current, vec![0; flows]);
        if self.epochs.len() == Self::EPOCHS_MAX {
            self.epochs.pop_back();
        }
        self.epochs.push_front(done);
        (0..flows)
            .map(|f| {
                let (mut bytes, mut span) = (0u64, 0u64);
                for epoch in self.epochs.iter().take(epochs_running(f).max(1)) {
                    bytes += epoch[f];
                    span += 1;
                    if bytes >= Self::WINDOW_BYTES {
                        break;
                    }
                }
                bytes as f64 * 8e9 / (span * self.epoch_ns) as f64
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bursty_slow_flow_is_measured_at_its_mean_and_a_fast_one_over_one_epoch() {
        let mut window = RateWindow::new(2, 1_000_000);
        let mut last = Vec::new();
        for epoch in 0..40 {
            // 64 KiB every fourth epoch: 131 Mbit/s on average.
            if epoch % 4 == 0 {
                window.count(0, 65_536);
            }
            window.count(1, 2_500_000 + (epoch % 2) * 500_000);
            last = window.end_epoch(|_| usize::MAX);
        }
        assert!(
            (last[0] - 65_536.0 * 8e9 / 4e6).abs() < 0.2 * last[0],
            "{last:?}"
        );
        assert_eq!(last[1], 2_500_000.0 * 8e9 / 1e6);
    }

    #[test]
    fn a_flow_is_not_diluted_by_the_epochs_before_it_ran() {
        let mut window = RateWindow::new(1, 1_000_000);
        for _ in 0..10 {
            window.end_epoch(|_| usize::MAX);
        }
        window.count(0, 10_000);
        assert_eq!(window.end_epoch(|_| 1), vec![80e6]);
    }
}
