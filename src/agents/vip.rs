//! `ocf:hamaster:vip`: a floating IPv4/IPv6 address, drop-in for `ocf:heartbeat:IPaddr2`.
//! Maps start/stop/monitor/validate-all onto `crate::vip`.

use std::time::Duration;

use crate::ocf::failure::Failed;
use crate::ocf::metadata::{ActionSpec, AgentInfo};
use crate::ocf::{Action, OcfEnv, OcfExit, Outcome};
use crate::params::vip::VIP_AGENT;
use crate::params::{ConfigError, Values};
use crate::vip::burst;
use crate::vip::{up, Target, Vip, VipConfig, VipError};

pub static ACTIONS: [ActionSpec; 6] = [
    ActionSpec::new("start", "20s"),
    ActionSpec::new("stop", "20s"),
    ActionSpec {
        interval: Some("10s"),
        depth: Some("0"),
        ..ActionSpec::new("monitor", "20s")
    },
    ActionSpec::ocf_1_1("reload-agent", "10s"),
    ActionSpec::new("validate-all", "20s"),
    ActionSpec::new("meta-data", "5s"),
];

pub static INFO: AgentInfo = AgentInfo {
    name: "vip",
    shortdesc: "Floating IPv4/IPv6 address (IPaddr2 drop-in)",
    longdesc: "Manages a floating IPv4 or IPv6 address on this host, like ocf:heartbeat:IPaddr2 \
        and with the same parameter names: it adds and removes the address through netlink \
        and announces it in-process with gratuitous ARP (request, reply, or both alternating) \
        or unsolicited IPv6 Neighbor Advertisements. Part of hamaster.",
    params: &VIP_AGENT,
    actions: &ACTIONS,
};

pub static AGENT: super::AgentDef = super::AgentDef { info: &INFO, run };

fn run(action: Action, env: &OcfEnv) -> Result<Outcome, Failed> {
    let values = Values::from_ocf(&VIP_AGENT, env);
    // Parsed once for every action: the namespace to enter comes from it too.
    let parsed = VipConfig::from_values(&values);
    // What stop can still find and remove when the configuration is unusable.
    let cleanup = match &parsed {
        Ok(_) => None,
        Err(_) => VipConfig::for_cleanup(&values),
    };
    let netns = parsed
        .as_ref()
        .ok()
        .or(cleanup.as_ref())
        .and_then(|c| c.network_namespace.clone());
    if let Some(outcome) = enter_namespace(action, netns, env)? {
        return Ok(outcome);
    }
    let config = |parsed: Result<VipConfig, ConfigError>| -> Result<VipConfig, VipError> {
        let c = parsed?;
        check_not_cloned(env)?;
        Ok(c)
    };
    let result = match action {
        Action::Start => config(parsed).and_then(|c| start(c, env)),
        Action::Stop => stop(parsed, cleanup),
        Action::Monitor => monitor(config(parsed), env),
        Action::ValidateAll => {
            config(parsed).and_then(|c| Vip::new(c)?.target().map(|_| Outcome::ok()))
        }
        // Only announcement settings are reloadable, and nothing keeps them between actions:
        // the next start and every monitor read them anew. The address stays as it is.
        Action::ReloadAgent => config(parsed).map(|_| Outcome::ok()),
        _ => Ok(Outcome::new(OcfExit::ErrUnimplemented)),
    };
    result.map_err(Failed::from)
}

/// network_namespace: every action runs inside the named namespace, as IPaddr2 re-executes
/// itself under `ip netns exec`. The namespace missing is this node's trouble: a probe finds
/// nothing running, stop has nothing to remove, the rest fail with 1.
fn enter_namespace(
    action: Action,
    name: Option<String>,
    env: &OcfEnv,
) -> Result<Option<Outcome>, VipError> {
    let Some(name) = name else {
        return Ok(None);
    };
    let path = std::path::Path::new("/run/netns").join(&name);
    let entered = std::fs::File::open(&path).and_then(|f| {
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
    });
    match entered {
        Ok(()) => Ok(None),
        Err(_) if env.is_probe() => Ok(Some(Outcome::new(OcfExit::NotRunning))),
        Err(e) if action == Action::Stop => {
            log::warn!("network namespace {name} ({e}): nothing of ours can be there");
            Ok(Some(Outcome::ok()))
        }
        Err(source) => Err(VipError::Namespace { name, path, source }),
    }
}

/// A cloned IPaddr2 is its iptables CLUSTERIP mode, which vip does not have.
fn check_not_cloned(env: &OcfEnv) -> Result<(), ConfigError> {
    match env.meta.get("clone_max").map(|m| m.trim().parse::<u64>()) {
        Some(Ok(n)) if n > 1 => Err(ConfigError::Invalid {
            param: "clone-max",
            value: n.to_string(),
            problem: "means IPaddr2's CLUSTERIP mode, which vip does not support: do not clone \
                a vip resource"
                .into(),
        }),
        _ => Ok(()),
    }
}

fn start(config: VipConfig, env: &OcfEnv) -> Result<Outcome, VipError> {
    let dad_wait = env.timeout_ms().map_or(up::DAD_WAIT, |t| {
        Duration::from_millis(t.saturating_sub(2000).max(1000))
    });
    up::bring_up(config, dad_wait, &crate::runfiles::root()).map(|_| Outcome::ok())
}

fn stop(
    parsed: Result<VipConfig, ConfigError>,
    cleanup: Option<VipConfig>,
) -> Result<Outcome, VipError> {
    let config = match (parsed, cleanup) {
        (Ok(c), _) | (Err(_), Some(c)) => c,
        // Without a usable ip nothing of ours can be on this host.
        (Err(e), None) => {
            log::warn!("stop with unusable configuration ({e}): nothing to remove");
            return Ok(Outcome::ok());
        }
    };
    up::take_down(config, &crate::runfiles::root()).map(|_| Outcome::ok())
}

/// IPaddr2's monitor: findif must place the address (a probe that cannot: not running; a
/// recurring monitor: 1), and the address must be there with that prefix. The state of the
/// link does not count, as in IPaddr2; an IPv6 address that failed DAD does (it never works).
fn monitor(config: Result<VipConfig, VipError>, env: &OcfEnv) -> Result<Outcome, VipError> {
    let config = match config {
        Ok(c) => c,
        // A probe on a host where the resource was never configured must say "not running".
        Err(_) if env.is_probe() => return Ok(Outcome::new(OcfExit::NotRunning)),
        Err(e) => return Err(e),
    };
    let mut vip = Vip::new(config)?;
    let ip = vip.config.ip;
    let resolved = match vip.resolve() {
        Ok(r) => r,
        Err(_) if env.is_probe() => return Ok(Outcome::new(OcfExit::NotRunning)),
        Err(e) => return Err(e),
    };
    let Some(addr) = vip.served(&resolved)? else {
        return Ok(not_running(
            env,
            format!(
                "{ip}/{} is not configured on {}",
                resolved.prefix, resolved.nic
            ),
        ));
    };
    if addr
        .flags
        .contains(netlink_packet_route::address::AddressFlags::Dadfailed)
    {
        return Ok(not_running(
            env,
            format!(
                "{ip} on {} failed duplicate address detection",
                resolved.nic
            ),
        ));
    }
    let c = &vip.config;
    if let (false, true, Some(link)) = (env.is_probe(), c.arp_count_refresh > 0, resolved.link) {
        burst::cancel(&crate::runfiles::root(), ip);
        let target = Target {
            link,
            prefix: addr.prefix,
            broadcast: addr.broadcast,
        };
        up::announce(
            &target,
            c,
            c.arp_count_refresh,
            &crate::runfiles::root(),
            &|| true,
        );
    }
    Ok(Outcome::ok())
}
/// 7, with a reason for recurring monitors (a probe finding nothing is not news).
fn not_running(env: &OcfEnv, why: String) -> Outcome {
    if env.is_probe() {
        Outcome::new(OcfExit::NotRunning)
    } else {
        Outcome::with_reason(OcfExit::NotRunning, why)
    }
}
