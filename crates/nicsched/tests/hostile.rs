//! Hostile inputs (docs/scenario.md, "Bounds"): each is refused with status 2 and a
//! located error line, inside 1 GiB of address space, without a panic. Every case
//! once exhausted memory, aborted, wrapped or ran for hours, or would if a bound
//! went missing. No case asserts a time: a child still running after [`GUARD`] is
//! killed and the case fails, which only a run that escaped its bounds reaches.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The address space each child may map.
const MEMORY_BYTES: libc::rlim_t = 1 << 30;
/// Far beyond what a refusal takes; only a run that was not refused gets here.
const GUARD: Duration = Duration::from_secs(60);

/// A scratch directory removed when dropped, even when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("nicsched-hostile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Outcome {
    status: Option<i32>,
    stderr: String,
    killed: bool,
}

/// Runs the binary with its address space limited, killing it after [`GUARD`].
fn run_limited(args: &[String], cwd: &Path) -> Outcome {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nicsched"));
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: MEMORY_BYTES,
                rlim_max: MEMORY_BYTES,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = command.spawn().expect("the binary starts");
    let pid = child.id();
    let mut stderr = child.stderr.take().expect("piped");
    let (done, finished) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        let status = child.wait().expect("the child is waited for");
        let _ = done.send(());
        (status, text)
    });
    let killed = finished.recv_timeout(GUARD).is_err();
    if killed {
        // SAFETY: the child is not yet reaped (the waiter still waits), so `pid` is ours.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
    let (status, text) = waiter.join().expect("the waiter does not panic");
    Outcome {
        status: status.code(),
        stderr: String::from_utf8_lossy(&text).into_owned(),
        killed,
    }
}

/// `PATH:LINE:COLUMN: error: ` somewhere in `stderr`, with numbers at least 1.
fn located(stderr: &str, path: &str) -> bool {
    stderr.lines().any(|line| {
        let Some(rest) = line.strip_prefix(path).and_then(|r| r.strip_prefix(':')) else {
            return false;
        };
        let mut parts = rest.splitn(3, ':');
        let number = |p: Option<&str>| {
            p.and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|n| n >= 1)
        };
        number(parts.next())
            && number(parts.next())
            && parts.next().is_some_and(|r| r.starts_with(" error: "))
    })
}

/// Two tenants, the first with an app split by flow.
const POLICY: &str = "link: { rate: 10Gbit }
tenants:
  - name: t1
    apps:
      - { name: batch, split: { by: flow, max_rate: 10Mbit } }
  - name: t2
";

/// A scenario of [`POLICY`], inline, and `rest` after it.
fn scenario(rest: &str) -> String {
    let policy: String = POLICY.lines().map(|l| format!("  {l}\n")).collect();
    format!("policy:\n{policy}{rest}")
}

/// A scenario offering `traffic` (one flow-mapping line) for `duration`.
fn traffic(duration: &str, traffic: &str) -> String {
    scenario(&format!(
        "duration: {duration}\ntraffic:\n  - {{ tenant: t1, {traffic} }}\n"
    ))
}

/// A policy whose link has `link` and whose first tenant has `fields` besides its name.
fn policy(link: &str, fields: &str) -> String {
    format!("link: {{ {link} }}\ntenants:\n  - {{ name: t1{fields} }}\n  - {{ name: t2 }}\n")
}

enum Input {
    /// Run `sim FILE`: the whole path a scenario takes before a run.
    Scenario(Vec<u8>),
    /// Run `check FILE` and `explain FILE`.
    Policy(Vec<u8>),
    /// Run `explain FILE --active LIST` on a valid policy.
    Active(&'static str),
    /// Command-line flags, with `{scenario}` standing for a scenario that is refused
    /// on its own: if the flag were let through, the error would not name it.
    Flags(&'static [&'static str], &'static str),
}

fn cases() -> Vec<(&'static str, Input)> {
    use Input::*;
    let s = |text: String| Scenario(text.into_bytes());
    let p = |text: String| Policy(text.into_bytes());
    let bulk =
        |duration: &str, flows: &str| s(traffic(duration, &format!("kind: bulk, flows: {flows}")));
    let nested = format!("link: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let mut laughs = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 0..9 {
        let prev = if i == 0 {
            "a".to_owned()
        } else {
            format!("b{}", i - 1)
        };
        laughs += &format!(
            "b{i}: &b{i} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        );
    }
    laughs += "link: { rate: *b8 }\ntenants: [{ name: t1 }]\n";
    let tenants = |n: usize| {
        let mut text = String::from("link: { rate: 10Gbit }\ntenants:\n");
        for i in 0..n {
            text += &format!("  - {{ name: t{i} }}\n");
        }
        text
    };
    let many_traffic = {
        let mut text = scenario("duration: 1s\ntraffic:\n");
        for _ in 0..2 {
            text += "  - { tenant: t1, kind: bulk, flows: 60000 }\n";
        }
        text
    };
    vec![
        // Files that are not YAML, or not a policy.
        ("empty file", p(String::new())),
        ("only comments", p("# nothing\n\n# here\n".into())),
        (
            "non-UTF-8",
            Policy(b"link: { rate: 10Gbit }\ntenants: [{ name: \xff\xfe }]\n".to_vec()),
        ),
        ("NUL bytes", Policy(b"link: \0\0\0\n".to_vec())),
        ("deep nesting", p(nested)),
        ("billion laughs", p(laughs)),
        ("200k tenants", p(tenants(200_000))),
        ("tenants above TENANTS_MAX", p(tenants(5000))),
        (
            "duplicate keys",
            p("link: { rate: 1Gbit }\nlink: { rate: 2Gbit }\ntenants: [{ name: t1 }]\n".into()),
        ),
        (
            "tenants of the wrong type",
            p("link: { rate: 1Gbit }\ntenants: 5\n".into()),
        ),
        (
            "link of the wrong type",
            p("link: fast\ntenants: [{ name: t1 }]\n".into()),
        ),
        (
            "very long name",
            p(policy("rate: 1Gbit", &format!("x{}", "a".repeat(1 << 20)))),
        ),
        (
            "tab indentation",
            p("link:\n\trate: 1Gbit\ntenants: [{ name: t1 }]\n".into()),
        ),
        // Numeric fields of a policy at their extremes.
        ("link rate 0", p(policy("rate: 0bit", ""))),
        ("link rate negative", p(policy("rate: -1Gbit", ""))),
        (
            "link rate overflowing",
            p(policy("rate: 99999999999999999999Tbit", "")),
        ),
        (
            "link rate above RATE_BPS_MAX",
            p(policy("rate: 18000000Tbit", "")),
        ),
        ("link rate 1e300", p(policy("rate: 1e300", ""))),
        ("link rate NaN", p(policy("rate: NaNGbit", ""))),
        ("link rate inf", p(policy("rate: .inf", ""))),
        ("link queues 0", p(policy("rate: 1Gbit, queues: 0", ""))),
        (
            "link queues 2^32",
            p(policy("rate: 1Gbit, queues: 4294967296", "")),
        ),
        ("link mtu 1B", p(policy("rate: 1Gbit, mtu: 1B", ""))),
        (
            "link mtu 1e9B",
            p(policy("rate: 1Gbit, mtu: 1000000000B", "")),
        ),
        ("weight 0", p(policy("rate: 1Gbit", ", weight: 0"))),
        ("weight -1", p(policy("rate: 1Gbit", ", weight: -1"))),
        (
            "weight 2^32",
            p(policy("rate: 1Gbit", ", weight: 4294967296")),
        ),
        ("weight 1e300", p(policy("rate: 1Gbit", ", weight: 1e300"))),
        ("weight NaN", p(policy("rate: 1Gbit", ", weight: .nan"))),
        ("priority 8", p(policy("rate: 1Gbit", ", priority: 8"))),
        (
            "min_rate above the link",
            p(policy("rate: 1Gbit", ", min_rate: 2Gbit")),
        ),
        ("max_rate 0", p(policy("rate: 1Gbit", ", max_rate: 0bit"))),
        (
            "core index 4096",
            p(policy("rate: 1Gbit", ", cores: [4096]")),
        ),
        ("core index -1", p(policy("rate: 1Gbit", ", cores: [-1]"))),
        (
            "buffer 2^64 bytes",
            p(policy("rate: 1Gbit", ", buffer: 18446744073709551616B")),
        ),
        (
            "buffer overflowing GiB",
            p(policy("rate: 1Gbit", ", buffer: 99999999999999GiB")),
        ),
        (
            "split max_rate 0",
            p(policy(
                "rate: 1Gbit",
                ", apps: [{ name: a, split: { by: flow, max_rate: 0bit } }]",
            )),
        ),
        (
            "port 65536",
            p(policy(
                "rate: 1Gbit",
                ", apps: [{ name: a, match: { ports: [65536] } }]",
            )),
        ),
        // Numeric fields of a scenario at their extremes.
        (
            "interval 1ns for 10s",
            s(scenario(
                "duration: 10s\ninterval: 1ns\ntraffic:\n  - { tenant: t1, kind: bulk }\n",
            )),
        ),
        (
            "interval 0",
            s(scenario(
                "duration: 10s\ninterval: 0ns\ntraffic:\n  - { tenant: t1, kind: bulk }\n",
            )),
        ),
        (
            "intervals × flows",
            s(scenario(
                "duration: 1000s\ninterval: 10ms\ntraffic:\n  - { tenant: t1, kind: bulk, flows: 1000 }\n",
            )),
        ),
        ("duration 1000000s", bulk("1000000s", "1")),
        ("duration 0", bulk("0s", "1")),
        ("duration negative", bulk("-1s", "1")),
        ("duration 1e300s", bulk("1e300s", "1")),
        ("duration overflowing", bulk("99999999999999999999s", "1")),
        ("duration without unit", bulk("10", "1")),
        ("duration inf", bulk(".inf", "1")),
        (
            "seed -1",
            s(scenario(
                "duration: 1s\nseed: -1\ntraffic:\n  - { tenant: t1, kind: bulk }\n",
            )),
        ),
        (
            "seed 2^64",
            s(scenario(
                "duration: 1s\nseed: 18446744073709551616\ntraffic:\n  - { tenant: t1, kind: bulk }\n",
            )),
        ),
        ("bulk flows 2^32-1", bulk("10s", "4294967295")),
        ("bulk flows 10^7", bulk("10s", "10000000")),
        ("bulk flows 0", bulk("10s", "0")),
        ("bulk flows 1.5", bulk("10s", "1.5")),
        ("bulk flows as text", bulk("10s", "many")),
        ("flows summed over traffic", s(many_traffic)),
        ("100k bulk flows retrying for 100s", bulk("100s", "100000")),
        (
            "udp 18000000Tbit of 1B",
            s(traffic("10s", "kind: udp, rate: 18000000Tbit, size: 1B")),
        ),
        (
            "udp 10Tbit of 1B",
            s(traffic("10s", "kind: udp, rate: 10Tbit, size: 1B")),
        ),
        (
            "udp size 0",
            s(traffic("1s", "kind: udp, rate: 1Gbit, size: 0B")),
        ),
        (
            "udp size 1e300B",
            s(traffic("1s", "kind: udp, rate: 1Gbit, size: 1e300B")),
        ),
        (
            "udp size 64KiB",
            s(traffic("1s", "kind: udp, rate: 1Gbit, size: 64KiB")),
        ),
        (
            "poisson rate 0",
            s(traffic("1s", "kind: poisson, rate: 0bit")),
        ),
        (
            "rpc rate 1e300",
            s(traffic("10s", "kind: rpc, rate: 1e300")),
        ),
        ("rpc rate NaN", s(traffic("10s", "kind: rpc, rate: .nan"))),
        ("rpc rate -1", s(traffic("10s", "kind: rpc, rate: -1"))),
        ("rpc rate 0/s", s(traffic("10s", "kind: rpc, rate: 0/s"))),
        (
            "rpc concurrency 4000000000",
            s(traffic("10s", "kind: rpc, concurrency: 4000000000")),
        ),
        (
            "rpc response 1GiB",
            s(traffic("10s", "kind: rpc, response: 1GiB")),
        ),
        (
            "rpc responses beyond the work bound",
            s(traffic("10s", "kind: rpc, rate: 10000000, response: 64KiB")),
        ),
        (
            "start past the duration",
            s(traffic("1s", "kind: bulk, start: 1e300s")),
        ),
        (
            "stop past the duration",
            s(traffic("1s", "kind: bulk, stop: 2s")),
        ),
        (
            "link override rate 0",
            s(scenario(
                "duration: 1s\nlink: { rate: 0bit }\ntraffic:\n  - { tenant: t1, kind: bulk }\n",
            )),
        ),
        // `explain --active` on a policy whose app is split.
        (
            "explain of 2 million split flows",
            Active("t1/batch*1000000,t1/batch*1000000"),
        ),
        (
            "explain of 2^64 split flows",
            Active("t1/batch*18446744073709551616"),
        ),
        // Numeric flags.
        (
            "bench --classes 2^32-1",
            Flags(
                &["bench", "-e", "wf2q", "--classes", "4294967295"],
                "--classes",
            ),
        ),
        (
            "bench --classes 0",
            Flags(&["bench", "-e", "wf2q", "--classes", "0"], "--classes"),
        ),
        (
            "bench --threads 0",
            Flags(
                &["bench", "-e", "wf2q", "--classes", "16", "--threads", "0"],
                "--threads",
            ),
        ),
        (
            "bench --threads 2^16",
            Flags(
                &[
                    "bench",
                    "-e",
                    "wf2q",
                    "--classes",
                    "16",
                    "--threads",
                    "65536",
                ],
                "--threads",
            ),
        ),
        (
            "bench --seconds inf",
            Flags(
                &["bench", "-e", "wf2q", "--classes", "16", "--seconds", "inf"],
                "--seconds",
            ),
        ),
        (
            "bench --seconds NaN",
            Flags(
                &["bench", "-e", "wf2q", "--classes", "16", "--seconds", "NaN"],
                "--seconds",
            ),
        ),
        (
            "bench --seconds 1e300",
            Flags(
                &[
                    "bench",
                    "-e",
                    "wf2q",
                    "--classes",
                    "16",
                    "--seconds",
                    "1e300",
                ],
                "--seconds",
            ),
        ),
        (
            "lab --class-limit 2^31-1",
            Flags(
                &["lab", "{scenario}", "--class-limit", "2147483647"],
                "--class-limit",
            ),
        ),
        (
            "lab --queue-limit 2^32-1",
            Flags(
                &["lab", "{scenario}", "--queue-limit", "4294967295"],
                "--queue-limit",
            ),
        ),
        (
            "lab --link-rate 1bit",
            Flags(&["lab", "{scenario}", "--link-rate", "1bit"], "--link-rate"),
        ),
        (
            "lab --link-rate 0bit",
            Flags(&["lab", "{scenario}", "--link-rate", "0bit"], "--link-rate"),
        ),
        (
            "lab --link-rate overflowing",
            Flags(
                &[
                    "lab",
                    "{scenario}",
                    "--link-rate",
                    "99999999999999999999Tbit",
                ],
                "--link-rate",
            ),
        ),
        (
            "lab-bench --rounds 2^32-1",
            Flags(
                &["lab-bench", "{scenario}", "--rounds", "4294967295"],
                "--rounds",
            ),
        ),
        (
            "lab-bench --seconds 1e300",
            Flags(
                &["lab-bench", "{scenario}", "--seconds", "1e300"],
                "--seconds",
            ),
        ),
        (
            "lab-bench --size 65535",
            Flags(&["lab-bench", "{scenario}", "--size", "65535"], "--size"),
        ),
        (
            "lab-bench --flows 0",
            Flags(&["lab-bench", "{scenario}", "--flows", "0"], "--flows"),
        ),
        (
            "sim --seed 2^64",
            Flags(
                &["sim", "{scenario}", "--seed", "18446744073709551616"],
                "--seed",
            ),
        ),
    ]
}

#[test]
fn hostile_inputs_are_refused_with_a_located_error_inside_their_bounds() {
    let scratch = Scratch::new("cases");
    let out = scratch.0.join("out").to_string_lossy().into_owned();
    // Refused on its own (an unknown tenant), so that a flag let through shows.
    let refused = scratch.file(
        "refused.yaml",
        traffic("1s", "kind: bulk")
            .replace("tenant: t1", "tenant: nobody")
            .as_bytes(),
    );
    let valid_policy = scratch.file("policy.yaml", POLICY.as_bytes());
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (i, (name, input)) in cases.iter().enumerate() {
        // Each run: its arguments, the file its error must point into, and a word it must name.
        let runs: Vec<(Vec<String>, Option<String>, Option<&str>)> = match input {
            Input::Scenario(bytes) => {
                let file = scratch.file(&format!("case{i}.yaml"), bytes);
                vec![(
                    vec![
                        "sim".into(),
                        file.clone(),
                        "-q".into(),
                        "--out".into(),
                        out.clone(),
                    ],
                    Some(file),
                    None,
                )]
            }
            Input::Policy(bytes) => {
                let file = scratch.file(&format!("case{i}.yaml"), bytes);
                ["check", "explain"]
                    .iter()
                    .map(|command| {
                        (
                            vec![command.to_string(), file.clone()],
                            Some(file.clone()),
                            None,
                        )
                    })
                    .collect()
            }
            Input::Active(list) => vec![(
                vec![
                    "explain".into(),
                    valid_policy.clone(),
                    "--active".into(),
                    list.to_string(),
                ],
                Some("--active".to_owned()),
                None,
            )],
            Input::Flags(args, flag) => vec![(
                args.iter()
                    .map(|a| a.replace("{scenario}", &refused))
                    .collect(),
                None,
                Some(*flag),
            )],
        };
        for (args, file, word) in runs {
            let outcome = run_limited(&args, &scratch.0);
            let stderr = outcome.stderr.trim_end();
            let mut wrong = Vec::new();
            if outcome.killed {
                wrong.push(format!("still running after {GUARD:?}: killed"));
            }
            if outcome.status != Some(2) {
                wrong.push(format!("status {:?}", outcome.status));
            }
            if stderr.contains("panicked") || stderr.contains("memory allocation") {
                wrong.push("a panic or an abort".into());
            }
            if !stderr.contains("error:") {
                wrong.push("no `error:`".into());
            }
            if let Some(file) = &file {
                if !located(stderr, file) {
                    wrong.push("no FILE:LINE:COLUMN: error:".into());
                }
                if !stderr.contains("(hint: ") {
                    wrong.push("no hint".into());
                }
            }
            if let Some(word) = word
                && !stderr.contains(word)
            {
                wrong.push(format!("does not name {word}"));
            }
            if !wrong.is_empty() {
                let shown: String = stderr.chars().take(400).collect();
                failures.push(format!(
                    "{name} ({}): {}\n    {shown}",
                    args[0],
                    wrong.join(", ")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} misbehaved:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
