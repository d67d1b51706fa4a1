//! Report writing at scale: report.html (`write_html`, which reads the runs'
//! files back) and one run's files with its PNGs (`write_run`), of a synthetic
//! run of 1,000 and of 4,000 apps. Read the ratio of the two sizes, not the
//! times: linear writing takes about 4 times as long for 4 times the apps
//! (a quadratic one took 16 times).

#[path = "../tests/common/synthetic.rs"]
mod synthetic;

use std::fs;
use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const INTERVALS: usize = 100;
/// (tenants, apps each): 1,000 and 4,000 apps.
const SIZES: [(usize, usize); 2] = [(100, 10), (400, 10)];

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("report-bench-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn report_writing(c: &mut Criterion) {
    let mut group = c.benchmark_group("report");
    group.sample_size(10);
    for (tenants, apps) in SIZES {
        let classes = tenants * apps;
        let record = synthetic::many_apps("wf2q", tenants, apps, INTERVALS);
        let dir = scratch(&format!("{classes}"));
        let run = dir.join("wf2q");
        group.bench_with_input(
            BenchmarkId::new("write_run", classes),
            &record,
            |b, record| b.iter(|| report::write_run(&run, record).unwrap()),
        );
        group.bench_with_input(BenchmarkId::new("write_html", classes), &run, |b, run| {
            b.iter(|| report::write_html(&dir, std::slice::from_ref(run)).unwrap())
        });
        let _ = fs::remove_dir_all(&dir);
    }
    group.finish();
}

criterion_group!(benches, report_writing);
criterion_main!(benches);
