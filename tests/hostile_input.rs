//! Hostile input: bytes that are not UTF-8 in the environment or the arguments, random bytes,
//! huge and negative numbers and over-long strings in every parameter, a unit name that looks
//! like an option, a resource name too long for a socket path. No action may ever panic (exit
//! 101) or abort; each answers with an OCF code and, where it fails, a reason. Every agent run
//! happens in a namespace of its own; only validating and read-only actions are fuzzed.

use hamaster_lab as support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use support::{run_command, Agent, Netns};

/// Seeded from the clock, or from HAMASTER_HOSTILE_SEED to replay a run: every failure names
/// the seed and the variable.
use hamaster::splitmix::SplitMix64 as Rng;

const REPLAY: &str = "HAMASTER_HOSTILE_SEED";

/// A hostile value, as raw bytes.
fn hostile(rng: &mut Rng) -> Vec<u8> {
    match rng.next_u64() % 7 {
        // Any byte but NUL, which no environment variable can carry.
        0 => (0..1 + rng.next_u64() % 40)
            .map(|_| (rng.next_u64() as u8).max(1))
            .collect(),
        1 => b"18446744073709551616".to_vec(),
        2 => format!("-{}", rng.next_u64()).into_bytes(),
        3 => vec![b'a' + (rng.next_u64() % 26) as u8; 5000 + (rng.next_u64() % 100_000) as usize],
        4 => b"\xff\xfe".to_vec(),
        5 => u64::MAX.to_string().into_bytes(),
        _ => b"-1".to_vec(),
    }
}

fn params_of(agent: &str) -> Vec<String> {
    let out = run_command({
        let mut c = std::process::Command::new(support::hamaster_bin());
        c.args(["ocf", agent, "meta-data"]);
        c
    });
    out.stdout
        .split("<parameter name=\"")
        .skip(1)
        .filter_map(|p| p.split('"').next().map(String::from))
        .collect()
}

fn assert_ocf_code(code: i32, what: &str, stderr: &str) {
    assert!(
        (0..=9).contains(&code),
        "{what}: exit {code} is no OCF code (a panic is 101)\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{what}: panicked\n{stderr}");
}

#[test]
fn bytes_that_are_not_utf8_in_the_environment_or_arguments_get_a_clear_answer() {
    let ns = Netns::new("hu8");
    // Any variable: meta-data still works.
    let mut cmd = Agent::new(&ns, "vip", &[]).command("meta-data", 0);
    cmd.env("X", OsStr::from_bytes(b"\xff"));
    let run = run_command(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("<resource-agent"));
    // A parameter: refused with 6, naming it.
    let mut cmd = Agent::new(&ns, "vip", &[]).command("validate-all", 0);
    cmd.env("OCF_RESKEY_ip", OsStr::from_bytes(b"192.0.2.\xff"));
    let run = run_command(cmd);
    run.expect(6, "parameter ip=");
    // An action: unknown, 3.
    let mut cmd = Agent::new(&ns, "vip", &[]).command("st", 0);
    cmd.arg(OsStr::from_bytes(b"art\xff"));
    let run = run_command(cmd);
    assert_ocf_code(run.code, "non-UTF-8 argument", &run.stderr);
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &ns.name])
        .arg(support::OcfDir::get().agent("vip"))
        .arg(OsStr::from_bytes(b"st\xffart"));
    let run = run_command(cmd);
    run.expect(3, "is not implemented");
}

#[test]
fn a_unit_name_like_an_option_and_a_resource_name_too_long_are_refused_clearly() {
    let ns = Netns::new("hun");
    let base = [("etcd_endpoints", "http://127.0.0.1:2379")];
    let unit = Agent::new(&ns, "master", &base)
        .instance("api")
        .param("service", "--now.service");
    unit.run("validate-all").expect(
        6,
        "parameter service=\"--now.service\" is not a systemd unit name",
    );
    let long = "r".repeat(200);
    let named = Agent::new(&ns, "master", &base)
        .instance(&long)
        .param("command", "/bin/true");
    named.run("validate-all").expect(6, "is too long");
    assert_eq!(named.probe().code, 7, "a probe finds nothing, never 6");
    assert_eq!(named.run("stop").code, 0, "nothing to stop");
}

#[test]
fn random_bytes_huge_and_negative_numbers_in_every_parameter_never_panic() {
    let seed = match std::env::var(REPLAY) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{REPLAY}={v:?} is not a seed")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64),
    };
    eprintln!("hostile parameter values from seed {seed} (replay: {REPLAY}={seed})");
    let mut rng = Rng(seed);
    let ns = Netns::new("hfz");
    let mut runs = 0;
    for agent in ["vip", "master"] {
        let params = params_of(agent);
        assert!(params.len() > 5, "{agent}: parameters from meta-data");
        for param in &params {
            for _ in 0..4 {
                let value = hostile(&mut rng);
                for (action, interval) in [("validate-all", 0), ("monitor", 0), ("monitor", 10_000)]
                {
                    let mut cmd = Agent::new(&ns, agent, &[])
                        .instance("api")
                        .param("ip", "192.0.2.10")
                        .param("etcd_endpoints", "http://127.0.0.1:2379")
                        .param("command", "/bin/true")
                        .command(action, interval);
                    cmd.env(format!("OCF_RESKEY_{param}"), OsStr::from_bytes(&value));
                    let run = run_command(cmd);
                    runs += 1;
                    let shown = String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned();
                    assert_ocf_code(
                        run.code,
                        &format!("{agent} {action} {param}={shown:?} (replay: {REPLAY}={seed})"),
                        &run.stderr,
                    );
                }
            }
        }
    }
    eprintln!("{runs} agent runs with hostile values: none panicked");
}
