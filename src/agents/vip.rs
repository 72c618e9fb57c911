//! `ocf:hamaster:vip`: a floating IPv4/IPv6 address, drop-in for `ocf:heartbeat:IPaddr2`.
//! Maps start/stop/monitor/validate-all onto `crate::vip`.

use std::time::Duration;

use crate::ocf::metadata::{ActionSpec, AgentInfo};
use crate::ocf::{Action, OcfEnv, OcfExit, Outcome};
use crate::params::vip::VIP_AGENT;
use crate::params::{ConfigError, Values};
use crate::vip::burst;
use crate::vip::{up, Target, Vip, VipConfig, VipError};

pub static ACTIONS: [ActionSpec; 5] = [
    ActionSpec::new("start", "20s"),
    ActionSpec::new("stop", "20s"),
    ActionSpec {
        interval: Some("10s"),
        depth: Some("0"),
        ..ActionSpec::new("monitor", "20s")
    },
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

/// How long IPv6 DAD may take when the caller gave no timeout.
const DEFAULT_DAD_WAIT: Duration = Duration::from_secs(10);

fn run(action: Action, env: &OcfEnv) -> Outcome {
    let values = Values::from_ocf(&VIP_AGENT, env);
    let result = match action {
        Action::Start => VipConfig::from_values(&values)
            .map_err(VipError::from)
            .and_then(|c| start(c, env)),
        Action::Stop => stop(&values),
        Action::Monitor => monitor(&values, env),
        Action::ValidateAll => VipConfig::from_values(&values)
            .map_err(VipError::from)
            .and_then(|c| Vip::new(c)?.resolve().map(|_| Outcome::ok())),
        _ => Ok(Outcome::new(OcfExit::ErrUnimplemented)),
    };
    result.unwrap_or_else(Outcome::from)
}

fn start(config: VipConfig, env: &OcfEnv) -> Result<Outcome, VipError> {
    let dad_wait = env.timeout_ms().map_or(DEFAULT_DAD_WAIT, |t| {
        Duration::from_millis(t.saturating_sub(2000).max(1000))
    });
    up::bring_up(config, dad_wait, &burst::run_dir()).map(|_| Outcome::ok())
}

fn stop(values: &Values) -> Result<Outcome, VipError> {
    let config = match VipConfig::from_values(values) {
        Ok(c) => c,
        Err(e) => match VipConfig::for_cleanup(values) {
            Some(c) => c,
            // Without a usable ip nothing of ours can be on this host.
            None => {
                log::warn!("stop with unusable configuration ({e}): nothing to remove");
                return Ok(Outcome::ok());
            }
        },
    };
    up::take_down(config, &burst::run_dir()).map(|_| Outcome::ok())
}

fn monitor(values: &Values, env: &OcfEnv) -> Result<Outcome, VipError> {
    let config = match VipConfig::from_values(values) {
        Ok(c) => c,
        // A probe on a host where the resource was never configured must say "not running".
        Err(_) if env.is_probe() => return Ok(Outcome::new(OcfExit::NotRunning)),
        Err(e) => return Err(e.into()),
    };
    let mut vip = Vip::new(config)?;
    let ip = vip.config.ip;
    // The interface the resource is configured on has vanished from this node: an error of
    // the node (1, as IPaddr2), not "not running"; a probe only asks whether it runs here.
    if let (false, Some(nic)) = (env.is_probe(), vip.config.nic.clone()) {
        if vip.link_by_name(&nic)?.is_none() {
            return Err(VipError::NotHere(ConfigError::invalid(
                &crate::params::vip::NIC,
                &nic,
                "is not an interface on this host (any more)",
            )));
        }
    }
    let Some(addr) = vip.find()? else {
        return Ok(not_running(
            env,
            format!("{ip} is not configured on this host"),
        ));
    };
    let link = vip.link(addr.index)?;
    let Some(link) = link.filter(|l| l.is_up()) else {
        let nic = vip
            .link(addr.index)?
            .map_or_else(|| addr.index.to_string(), |l| l.name);
        return Ok(not_running(
            env,
            format!("{ip} is on {nic}, but {nic} is down"),
        ));
    };
    if addr
        .flags
        .contains(netlink_packet_route::address::AddressFlags::Dadfailed)
    {
        return Ok(not_running(
            env,
            format!("{ip} on {} failed duplicate address detection", link.name),
        ));
    }
    let c = &vip.config;
    if !env.is_probe() && c.arp_count_refresh > 0 {
        burst::cancel(&burst::run_dir(), ip);
        let target = Target {
            link,
            prefix: addr.prefix,
        };
        up::announce(&target, c, c.arp_count_refresh, &burst::run_dir());
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
