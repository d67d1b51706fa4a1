//! `valve` beside a TCP sender's empty instants: a bulk flow posts its next send
//! only when the completion of one comes back, 20 us after it left the wire, so
//! its class holds nothing for that long at each send. Counted as having run
//! empty, it was not hungry at the rate updates and got what it had sent: a
//! weight-50 tenant's one flow beside seven of weight 1 got 780.5 of its 877.2
//! Mbit/s, each of the others 31.4 of 17.5.

mod common;

use common::checked_run;
use report::summarize;

#[test]
fn a_heavy_tenants_one_flow_gets_its_share() {
    let mut text = String::from(
        "policy:\n  link: { rate: 1Gbit }\n  tenants:\n    - { name: heavy, weight: 50 }\n",
    );
    for i in 0..7 {
        text += &format!("    - {{ name: l{i} }}\n");
    }
    text += "duration: 4s\ninterval: 1s\ntraffic:\n  - { tenant: heavy, kind: bulk }\n";
    for i in 0..7 {
        text += &format!("  - {{ tenant: l{i}, kind: bulk }}\n");
    }
    let s = summarize(&checked_run(&text, "valve"));
    let heavy = s.tenants.iter().find(|t| t.name == "heavy").unwrap();
    let error = heavy.throughput_bps / heavy.ideal_bps - 1.0;
    assert!(
        error.abs() <= 0.02,
        "heavy: {:.1} of {:.1} Mbit/s",
        heavy.throughput_bps / 1e6,
        heavy.ideal_bps / 1e6
    );
}
