//! `hamaster takeover` and `hamaster release`: the cold-standby path of the runbook. With the
//! cluster stack down, an operator runs the guard in the foreground from a config file: it
//! waits for the old holder's key to go, takes the lease, raises the VIP, starts the service
//! and guards them until `hamaster release` or a signal, then steps down cleanly.

use std::time::{Duration, Instant};

use clap::Args;

use super::config::ResourceFile;
use super::CliError;
use crate::guard::{self as g, GuardArgs};
use crate::lease::leader_key;
use crate::lease::{Etcd, EtcdConfig};
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::resource::config::MasterConfig;
use crate::resource::dir::ResourceDir;
use crate::resource::status;
use crate::service::ServiceSpec;

#[derive(Debug, Args)]
pub struct TakeoverArgs {
    #[command(flatten)]
    pub file: ResourceFile,
    /// Seconds to wait for the current holder's key to go before giving up (at most a day).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(0..=MAX_WAIT))]
    pub wait: u64,
    /// Confirms that the cluster stack configured on this host is down on purpose on every
    /// node (runbook step 2); without it, takeover refuses where the CIB names the resource.
    #[arg(long)]
    pub cluster_down: bool,
    /// Confirms that this node, named by the failsafe record of a master that may be holding
    /// through an etcd outage, is down (powered off, fenced): without it, takeover waits while
    /// the record names another node it cannot prove down (docs/runbook.md).
    #[arg(long, value_name = "NODE")]
    pub holder_down: Option<String>,
    /// Takes over even though this etcd has never seen a master of this name (no leader key,
    /// no seen mark under etcd_prefix): a new installation, or one whose masters all ran a
    /// hamaster that wrote no marks.
    #[arg(long)]
    pub force: bool,
    /// The drill: checks everything a takeover needs here (configuration, programs, etcd
    /// and its certificates, the resource known to etcd, the VIP's interface, Pacemaker)
    /// and takes nothing. Exit 0 when a takeover could go ahead, 1 when not (each problem
    /// said).
    #[arg(long)]
    pub check: bool,
}

/// Where Pacemaker keeps its configuration on a cluster node, whether it runs or not.
pub(super) const CIB_ON_DISK: &str = "/var/lib/pacemaker/cib/cib.xml";

/// The longest `--wait` accepted: a day. Beyond it a deadline computed from it could overflow.
const MAX_WAIT: u64 = 86_400;

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Resource name (as given to takeover).
    #[arg(long)]
    pub resource: String,
    /// Seconds to wait for the guard to step down (at most a day).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=MAX_WAIT))]
    pub wait: u64,
}

/// Whether this host's CIB on disk names `resource` (or its clone), whether Pacemaker runs or
/// not.
pub(super) fn cib_on_disk_names(resource: &str) -> bool {
    let Ok(cib) = std::fs::read_to_string(CIB_ON_DISK) else {
        return false;
    };
    [
        format!("id=\"{resource}\""),
        format!("id=\"{resource}-clone\""),
    ]
    .iter()
    .any(|n| cib.contains(n.as_str()))
}

/// Why takeover must not assume the cluster is gone, when this host's CIB names the resource
/// while Pacemaker is not running here: the stack may be starting, stopped here only, or
/// about to be restarted, and would then manage the resource beside us.
fn cluster_configured_with(resource: &str) -> Option<String> {
    cib_on_disk_names(resource).then(|| {
        format!(
            "the cluster configured on this host ({CIB_ON_DISK}) manages {resource}, though \
             Pacemaker is not running here. If the cluster stack is down on purpose on every \
             node (docs/runbook.md, step 2), say so with --cluster-down"
        )
    })
}

/// Why Pacemaker on this host must keep this resource, if it manages it: two managers of
/// one master is exactly what hamaster exists to prevent.
pub(super) fn pacemaker_manages(resource: &str) -> Option<String> {
    let out = crate::service::tool_output(
        std::time::Duration::from_secs(10),
        "crm_resource",
        &["--resource", resource, "--locate"],
    );
    out.map(|stdout| {
        let where_ = stdout.trim().replace('\n', "; ");
        format!(
            "Pacemaker on this host is running and manages {resource} ({}). Use pcs (pcs resource move/ban) \
             instead, or stop the cluster stack on this host first (pcs cluster stop)",
            if where_.is_empty() { "not running anywhere".into() } else { where_ }
        )
    })
}

impl super::Verb for TakeoverArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init(&format!("hamaster-takeover({})", self.file.name()));
        // A guard that ran has logged why it ended; a refusal is said here.
        takeover(self).map_err(|e| match e {
            CliError::Guard(_) => Failed::from(e).logged(),
            e => Failed::from(e),
        })
    }
}

impl super::Verb for ReleaseArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init("hamaster-release");
        release(self).map_err(Failed::from)
    }
}

/// Whether this etcd has ever seen a master named `resource` of the configured cluster
/// (cluster_name) under the configured prefix: its leader key, failsafe record or seen mark
/// (`crate::lease::seen_key`). Ok: what was seen; Err: why a takeover must not assume it
/// replaces the cluster's master (etcd unreachable included: cannot tell is no answer; the
/// resource seen only under another cluster's name or only under a legacy key).
fn seen_here(cfg: &EtcdConfig, resource: &str) -> Result<String, String> {
    let prefix = cfg.prefix.trim_end_matches('/').to_string();
    let scope = cfg.scope()?;
    let cluster = cfg.cluster.clone().unwrap_or_default();
    let key = leader_key(&scope, resource);
    let mark = crate::lease::seen_key(&scope, resource);
    let cannot = |e: &dyn std::fmt::Display| {
        format!(
            "cannot tell whether this etcd has seen a master named {resource}: etcd: {e} \
             (retry once etcd answers)"
        )
    };
    status::block_on(async {
        let etcd = Etcd::connect(cfg, Duration::from_secs(2))
            .await
            .map_err(|e| cannot(&e))?;
        if let Some(h) = etcd.holder(&key).await.map_err(|e| cannot(&e))? {
            return Ok(format!("its leader key {key} is held by {} now", h.node));
        }
        let record = crate::failsafe::record_key(&scope, resource);
        let held = etcd.read_record(&record).await.map_err(|e| cannot(&e))?;
        if held.value.is_some() {
            return Ok(format!("its failsafe record {record} is there"));
        }
        let read = etcd.read_record(&mark).await.map_err(|e| cannot(&e))?;
        if let Some(value) = read.value {
            return Ok(match crate::lease::Seen::from_json(&value) {
                Some(s) => format!(
                    "{} took its key last ({}, {} s ago)",
                    s.node,
                    s.by,
                    crate::lease::clock::unix_ms().saturating_sub(s.at_unix_ms) / 1000
                ),
                None => format!("{mark} is there"),
            });
        }
        let mut others: Vec<String> = etcd
            .keys_under(&format!("{prefix}/"), 1000)
            .await
            .unwrap_or_default()
            .iter()
            .filter_map(|k| crate::lease::resource_of(&prefix, k).map(String::from))
            .collect();
        others.sort();
        others.dedup();
        // The same resource under another cluster's name, or under the legacy key.
        let elsewhere: Vec<&str> = others
            .iter()
            .filter_map(|o| match o.split_once('/') {
                Some((c, r)) if r == resource => Some(c),
                None if o == resource => Some("(none: the legacy key, before the cluster's name)"),
                _ => None,
            })
            .collect();
        let hint = if elsewhere.is_empty() {
            String::new()
        } else {
            format!(
                "; {resource} was seen in this etcd under cluster {} and not under \
                 cluster_name={cluster:?}: the config file must name the cluster as its \
                 corosync does (totem.cluster_name)",
                elsewhere.join(", ")
            )
        };
        Err(format!(
            "no master named {resource} of cluster {cluster:?} has ever held a key under \
             {prefix} in this etcd (neither {key} nor {mark}){hint}{}: a takeover would lead \
             beside the cluster's master, not instead of it. The resource name (--resource, \
             else the config file's name) must be the Pacemaker resource's id, cluster_name the \
             cluster's name and etcd_prefix the cluster's. On a new installation, or where \
             every master ran a hamaster that wrote no seen marks, say --force",
            if others.is_empty() {
                String::new()
            } else {
                format!("; seen there: {}", others.join(", "))
            }
        ))
    })
}

fn takeover(a: &TakeoverArgs) -> Result<OcfExit, CliError> {
    let (config, resource) = a.file.load_cold()?;
    ResourceDir::check(&crate::runfiles::root(), &resource).map_err(CliError::BadName)?;
    if a.check {
        return Ok(drill(a, &config, &resource));
    }
    config.check_installed()?;
    // The key names the cluster: a cold standby has no corosync to ask, its file names it.
    let scope = config.etcd.scope().map_err(|why| CliError::Config {
        path: a.file.config.clone(),
        detail: why,
    })?;
    if let Some(why) = pacemaker_manages(&resource) {
        return Err(CliError::Refused(why));
    }
    if let (false, Some(why)) = (a.cluster_down, cluster_configured_with(&resource)) {
        return Err(CliError::Refused(why));
    }
    match (a.force, seen_here(&config.etcd, &resource)) {
        (_, Ok(seen)) => eprintln!("hamaster takeover: {resource} is known to etcd: {seen}"),
        (true, Err(why)) => eprintln!("hamaster takeover: --force: {why}"),
        (false, Err(why)) => return Err(CliError::Refused(why)),
    }
    // Held for the guard's whole life: agent actions on this node wait for it and then fail
    // with a reason naming this takeover.
    let dir = ResourceDir::new(&crate::runfiles::root(), &resource);
    let _lock = dir
        .lock(Duration::from_secs(2), "hamaster takeover")
        .map_err(|e| CliError::Refused(e.to_string()))?;
    let node = a.file.node();
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET") {
        let (status_socket, limit) = (dir.socket(), Duration::from_secs(a.wait) + READY_SLACK);
        std::thread::spawn(move || notify_when_serving(&socket, &status_socket, limit));
    }
    eprintln!(
        "hamaster takeover: {resource} as {node}: waiting up to {} s for the leader key {}; `hamaster release --resource {resource}` or Ctrl-C steps down",
        a.wait,
        leader_key(&scope, &resource)
    );
    g::run(GuardArgs {
        resource,
        node,
        config,
        acquire_for: Duration::from_secs(a.wait),
        run_dir: crate::runfiles::root(),
        pacemaker_resource: None,
        holder_down: a.holder_down.clone(),
        campaign: None,
    })?;
    Ok(OcfExit::Success)
}

/// How long after `--wait` the guard may take to raise the VIP and start the service before
/// the readiness watch stops asking (systemd's start timeout ends the unit before).
const READY_SLACK: Duration = Duration::from_secs(120);

/// Under systemd (`Type=notify`): asks this takeover's guard every 100 ms whether it serves —
/// key held, VIP present (where there is one), service running — and then tells systemd
/// READY=1, once; gives up after `limit`. Nothing is said when it never serves: the process
/// ends, and systemd marks the start failed.
fn notify_when_serving(notify: &std::ffi::OsStr, status_socket: &std::path::Path, limit: Duration) {
    let until = Instant::now() + limit;
    // One runtime for the whole watch, not one per question.
    let serving = status::block_on(async {
        while Instant::now() < until {
            let serving = status::get_status(status_socket, Duration::from_secs(1))
                .await
                .is_ok_and(|s| {
                    s.role == status::Role::Leader
                        && s.service_running
                        && (s.vip.is_none() || s.vip_present == Some(true))
                });
            if serving {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    });
    if serving {
        if let Err(e) = sd_notify(
            notify,
            "READY=1\nSTATUS=leading: key held, VIP up, service running",
        ) {
            log::warn!("cannot tell systemd the takeover is ready: {e}");
        }
    }
}

/// One datagram to systemd's notification socket: a path, or an abstract name (`@…`).
fn sd_notify(socket: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let bytes = socket.as_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)?
        }
        None => SocketAddr::from_pathname(std::path::Path::new(socket))?,
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

/// The drill (`takeover --check`): every check a takeover makes, and those it meets only when
/// it acts (the VIP's interface, the service's unit), said one per line; nothing is taken.
fn drill(a: &TakeoverArgs, config: &MasterConfig, resource: &str) -> OcfExit {
    let mut problems = 0;
    let mut say = |what: &str, outcome: Result<String, String>| {
        let (mark, text) = match outcome {
            Ok(t) => ("ok     ", t),
            Err(t) => {
                problems += 1;
                ("PROBLEM", t)
            }
        };
        println!("{mark} {what:<12} {text}");
    };
    say(
        "config",
        Ok(format!(
            "{} as resource {resource}",
            a.file.config.display()
        )),
    );
    say(
        "cluster",
        config
            .etcd
            .scope()
            .map(|scope| format!("the leader key is {}", leader_key(&scope, resource))),
    );
    say(
        "installed",
        config
            .check_installed()
            .map(|()| "certificates, keys and programs readable".into())
            .map_err(|e| e.to_string()),
    );
    if let ServiceSpec::Systemd { unit } = &config.service {
        let state = crate::service::tool_output(
            Duration::from_secs(10),
            "systemctl",
            &["show", "--property", "LoadState", "--value", "--", unit],
        );
        say(
            "unit",
            match state.as_deref().map(str::trim) {
                Some("loaded") => Ok(format!("{unit} is loaded")),
                Some(other) => Err(format!("{unit}: LoadState {other}")),
                None => Err(format!("{unit}: systemctl did not answer")),
            },
        );
    }
    say(
        "pacemaker",
        match pacemaker_manages(resource)
            .or_else(|| cluster_configured_with(resource).filter(|_| !a.cluster_down))
        {
            Some(why) => Err(format!("takeover would refuse: {why}")),
            None => Ok(format!("does not manage {resource} on this host")),
        },
    );
    let versions = status::block_on(async {
        let etcd = Etcd::connect(&config.etcd, Duration::from_secs(2)).await?;
        Ok::<_, crate::lease::LeaseError>(etcd.versions().await)
    });
    say(
        "etcd",
        match versions {
            Ok(v) if !v.is_empty() => Ok(v
                .iter()
                .map(|(e, v)| format!("{e} {v}"))
                .collect::<Vec<_>>()
                .join(", ")),
            Ok(_) => Err("no member answered its status".into()),
            Err(e) => Err(e.to_string()),
        },
    );
    say(
        "known",
        match (a.force, seen_here(&config.etcd, resource)) {
            (_, Ok(seen)) => Ok(seen),
            (true, Err(why)) => Ok(format!("--force: {why}")),
            (false, Err(why)) => Err(why),
        },
    );
    for vip in config.vips() {
        let placed = crate::vip::Vip::new(vip.clone()).and_then(|mut v| {
            let target = v.target()?;
            let here = v.copies()?;
            Ok((target, here.len()))
        });
        say(
            "vip",
            match placed {
                Ok((t, 0)) => Ok(format!(
                    "{}/{} would go on {}",
                    vip.ip, t.prefix, t.link.name
                )),
                Ok((t, _)) => Err(format!(
                    "{} is on this host already (it would go on {})",
                    vip.ip, t.link.name
                )),
                Err(e) => Err(e.to_string()),
            },
        );
    }
    println!(
        "{}",
        if problems == 0 {
            format!("a takeover of {resource} could go ahead here (nothing was taken)")
        } else {
            format!("{problems} problem(s): a takeover of {resource} would not go ahead here")
        }
    );
    if problems == 0 {
        OcfExit::Success
    } else {
        OcfExit::ErrGeneric
    }
}

fn release(a: &ReleaseArgs) -> Result<OcfExit, CliError> {
    let dir = ResourceDir::new(&crate::runfiles::root(), &a.resource);
    let Some(pid) = dir.live_guard() else {
        println!(
            "no guard runs for {} on this host: nothing to release",
            a.resource
        );
        return Ok(OcfExit::Success);
    };
    match status::block_on(status::step_down(
        &dir.socket(),
        Duration::from_secs(a.wait),
    )) {
        Ok(st) => {
            let until = Instant::now() + Duration::from_secs(5);
            while dir.is_guard(pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            println!(
                "released {}: service stopped, VIP removed, leader key given back (fencing token was {})",
                a.resource,
                st.fencing_token.map_or("-".into(), |t| t.to_string())
            );
            Ok(OcfExit::Success)
        }
        Err(source) => Err(CliError::StepDown { pid, source }),
    }
}
