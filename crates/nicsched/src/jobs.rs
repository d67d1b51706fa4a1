//! Independent runs (one enforcer's, one point of a sweep) spread over threads, for
//! `sim` and `sweep` alike.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most runs at once `-j/--jobs` takes: each holds a simulator's state.
pub const JOBS_MAX: i64 = 1024;

/// Threads for `items` runs when `-j` asked for `asked`: by default one per core,
/// never more than there are runs.
pub fn threads(asked: Option<usize>, items: usize) -> usize {
    asked
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, items.max(1))
}

/// `run` on every item, `threads` at a time, each taking the next item as it is
/// free; the results in the items' order, so the output does not depend on `-j`.
pub fn map<T: Sync, R: Send>(items: &[T], threads: usize, run: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(index) else {
                        return;
                    };
                    let result = run(item);
                    results.lock().expect("no worker panics holding it")[index] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("workers are done")
        .into_iter()
        .map(|result| result.expect("every item ran"))
        .collect()
}
