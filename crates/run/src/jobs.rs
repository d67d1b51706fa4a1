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

/// `run` on every index below `items`, `threads` at a time, in order of index as
/// threads come free, until one fails: no index is started after a failure, and
/// the error returned is that of the lowest index that failed (every lower one was
/// started before it and is finished), so it does not depend on `threads`.
pub fn try_each<E: Send>(
    items: usize,
    threads: usize,
    run: impl Fn(usize) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<(usize, E)>> = Mutex::new(None);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, items.max(1)) {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= items {
                        return;
                    }
                    if let Err(error) = run(index) {
                        stop.store(true, Ordering::Relaxed);
                        let mut failed = failed.lock().expect("no worker panics holding it");
                        if failed.as_ref().is_none_or(|(first, _)| index < *first) {
                            *failed = Some((index, error));
                        }
                    }
                }
            });
        }
    });
    match failed.into_inner().expect("workers are done") {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// Memory the system can give without swapping (`MemAvailable`), where it says.
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// Of `threads` runs at once of `run_bytes` each, how many fit in half of
/// `available` (the other half for the rest of the machine), at least one.
pub fn within_memory(threads: usize, run_bytes: u64, available: u64) -> usize {
    let fit = (available / 2) / run_bytes.max(1);
    threads
        .min(usize::try_from(fit).unwrap_or(usize::MAX))
        .max(1)
}
