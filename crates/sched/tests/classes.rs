//! What each enforcer says of the classes it made: apps first, then one per split key.

use policy::{AppId, parse_policy};
use sched::testkit::{Source, drive_link};

#[test]
fn enforcers_with_classes_count_one_per_split_destination_and_the_nic_model_none() {
    let policy = parse_policy(
        "
link: { rate: 1Gbit, queues: 2 }
tenants:
  - name: t
    apps:
      - name: spread
        split: { by: destination, max_rate: 100Mbit }
  - name: u
",
        "p.yaml",
    )
    .unwrap();
    // drive_link gives each source its own destination.
    let sources: Vec<Source> = (0..5)
        .map(|_| Source {
            app: AppId(0),
            len_bytes: 1500,
            flows: 1,
            depth: 4,
        })
        .collect();
    for info in sched::registry::built() {
        let name = info.name;
        let mut enforcer = sched::build(name, &policy).unwrap();
        let has_classes = info.has_classes();
        let apps = policy.apps.len();
        assert_eq!(
            enforcer.classes(),
            has_classes.then_some(apps),
            "{name} before"
        );
        drive_link(&policy, enforcer.as_mut(), &sources, 0, 1_000_000);
        assert_eq!(
            enforcer.classes(),
            has_classes.then_some(apps + 5),
            "{name} after"
        );
    }
}
