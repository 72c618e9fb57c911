//! `hamaster status`: who holds the leader key in etcd, with what lease and fencing token, and
//! what this node's guard, VIP and service are doing. For operators and the runbook.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::CliError;
use crate::lease::{leader_key, Etcd, EtcdConfig};
use crate::ocf::failure::Failed;
use crate::ocf::OcfExit;
use crate::resource::dir::ResourceDir;
use crate::resource::status::{self, GuardStatus};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The resource (on a cluster node its parameters are read from the CIB, as Pacemaker
    /// passes them to the agent).
    #[arg(value_name = "RESOURCE")]
    pub name: Option<String>,
    /// Resource configuration (TOML, the master agent's parameters): the cold standby's, where
    /// no cluster runs. Without it the parameters come from this node's CIB.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Resource name (as RESOURCE); with --config, default: the file's name without extension.
    #[arg(long)]
    pub resource: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct EtcdView {
    holder: Option<String>,
    lease_id: Option<String>,
    ttl_left_s: Option<u64>,
    fencing_token: Option<i64>,
    error: Option<String>,
    /// The error is etcd not answering (no member, no quorum), not this node's configuration,
    /// files or user.
    #[serde(default)]
    unreachable: bool,
}

/// Where a report's parameters came from: JSON `"cib"` or `{"file": PATH}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Parameters {
    Cib,
    File(std::path::PathBuf),
}

#[derive(Debug, Serialize)]
struct Report {
    resource: String,
    /// Where the parameters came from.
    parameters: Parameters,
    key: String,
    etcd: EtcdView,
    /// stopped | started | promoted
    local_role: String,
    guard: Option<GuardStatus>,
    guard_error: Option<String>,
    /// Every node's instance as this node's Pacemaker shows it (parameters from the CIB: a
    /// cluster node); answered without etcd.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<Result<Vec<super::cluster::NodeView>, String>>,
    /// What not to do now, and why (etcd does not answer; no standby could take over).
    warnings: Vec<String>,
}

impl super::Verb for StatusArgs {
    fn exec(&self) -> Result<OcfExit, Failed> {
        crate::logging::init("hamaster-status");
        // etcd unreachable is said in the report already.
        run(self).map_err(|e| match e {
            CliError::Etcd(_) => Failed::from(e).logged(),
            e => Failed::from(e),
        })
    }
}

/// The report, printed; etcd unreachable is said in it, and ends the command with 1.
fn run(a: &StatusArgs) -> Result<OcfExit, CliError> {
    let named = match (&a.name, &a.resource) {
        (Some(n), Some(r)) if n != r => {
            return Err(CliError::Args(format!(
                "RESOURCE {n:?} and --resource {r:?} differ"
            )))
        }
        (n, r) => n.as_deref().or(r.as_deref()),
    };
    let (cfg, resource, parameters) = match (&a.config, named) {
        (Some(path), _) => {
            let (cfg, resource) = super::config::load_as(path, named, EtcdConfig::from_values)?;
            (cfg, resource, Parameters::File(path.clone()))
        }
        (None, Some(resource)) => {
            let cfg = super::config::from_cib(resource, EtcdConfig::from_values)?;
            (cfg, resource.to_string(), Parameters::Cib)
        }
        (None, None) => {
            return Err(CliError::Args(
                "name the resource (hamaster status api: its parameters from this node's CIB) \
                 or its config file (--config /etc/hamaster/api.toml: the cold standby)"
                    .into(),
            ))
        }
    };
    let mut report = gather(&cfg, &resource, parameters);
    if a.config.is_none() {
        report.cluster = Some(super::cluster::look(&resource));
    }
    report.warnings = warnings(&report);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", table(&report));
    }
    match report.etcd.error {
        Some(e) => Err(CliError::Etcd(e)),
        None => Ok(OcfExit::Success),
    }
}

fn gather(cfg: &EtcdConfig, resource: &str, parameters: Parameters) -> Report {
    // Without the cluster's name there is no key to read: said as etcd's error, the key shown
    // as far as it is known.
    let (key, holder) = match cfg.scope() {
        Ok(scope) => {
            let key = leader_key(&scope, resource);
            let holder = status::block_on(async {
                let etcd = Etcd::connect(cfg, Duration::from_secs(2)).await?;
                etcd.holder(&key).await
            })
            .map_err(|e| {
                let unreachable = matches!(e, crate::lease::LeaseError::Etcd { .. });
                (e.to_string(), unreachable)
            });
            (key, holder)
        }
        Err(why) => (
            leader_key(&format!("{}/?", cfg.prefix.trim_end_matches('/')), resource),
            Err((why, false)),
        ),
    };
    let etcd = match holder {
        Ok(h) => EtcdView {
            holder: h.as_ref().map(|h| h.node.clone()),
            lease_id: h.as_ref().map(|h| h.lease.to_string()),
            ttl_left_s: h.as_ref().and_then(|h| h.ttl_left).map(|t| t.as_secs()),
            fencing_token: h.as_ref().map(|h| h.token),
            error: None,
            unreachable: false,
        },
        Err((e, unreachable)) => EtcdView {
            holder: None,
            lease_id: None,
            ttl_left_s: None,
            fencing_token: None,
            error: Some(e),
            unreachable,
        },
    };
    let dir = ResourceDir::new(&crate::runfiles::root(), resource);
    let (guard, guard_error) = if dir.live_guard().is_some() {
        match status::block_on(status::get_status(&dir.socket(), Duration::from_secs(2))) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, None)
    };
    let local_role = if guard.is_some() || dir.promoted().exists() {
        "promoted"
    } else if dir.started().exists() {
        "started"
    } else {
        "stopped"
    };
    Report {
        resource: resource.to_string(),
        parameters,
        key,
        etcd,
        local_role: local_role.into(),
        guard,
        guard_error,
        cluster: None,
        warnings: Vec::new(),
    }
}

/// What an operator must not do now, and why: during an etcd outage, moving the master is an
/// outage (nobody can take the key); with no promotable standby, a failure of the master is.
fn warnings(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let nodes = r.cluster.as_ref().and_then(|c| c.as_ref().ok());
    let master = nodes
        .and_then(|n| {
            n.iter()
                .find(|n| matches!(n.role.as_str(), "Promoted" | "Master"))
        })
        .map(|n| n.name.clone())
        .or_else(|| r.etcd.holder.clone());
    if r.etcd.unreachable {
        let on = master.map_or(String::new(), |m| format!(" (on {m})"));
        out.push(format!(
            "etcd does not answer (etcd holder, above). Do NOT move the master{on} now: no pcs resource move, \
             pcs node standby, hamaster switchover, reboot or shutdown of its node. No other \
             node can take the leader key until etcd answers, so a move is an outage, not a \
             failover. The master holds through the outage where etcd_outage lets it, or fences \
             itself at its deadline. Restore etcd first (docs/oncall.md, \"etcd down\")"
        ));
    }
    if let Some(nodes) = nodes {
        if !r.etcd.unreachable
            && nodes.len() > 1
            && super::cluster::promotable_standbys(nodes).is_empty()
        {
            out.push(
                "no standby can be promoted now (none online with a promotion score): a \
                 failure of the master is an outage until one can (docs/oncall.md)"
                    .to_string(),
            );
        }
    }
    out
}

/// The guard binary row: the release and protocol the running guard was started from, and
/// what to do when that is not this binary's (a package update since its promote).
fn guard_binary(g: &GuardStatus) -> String {
    use crate::resource::status::{PROTOCOL, RELEASE};
    let running = g.binary();
    if g.release == RELEASE && g.protocol == PROTOCOL {
        running
    } else {
        format!(
            "{running}; this binary is hamaster {RELEASE} (protocol {PROTOCOL}): `hamaster \
             switchover` moves the master onto an updated node (docs/upgrading.md)"
        )
    }
}

/// The watchdog row: device, armed or not, timeout, last ping; or why there is none.
fn watchdog_line(w: &crate::resource::status::WatchdogStatus) -> String {
    let Some(device) = &w.device else {
        return format!("none: {}", w.note.as_deref().unwrap_or("not chosen"));
    };
    let mut line = device.clone();
    if w.armed {
        line.push_str(&format!(
            " armed, timeout {} s",
            w.timeout_s.map_or("?".into(), |t| t.to_string())
        ));
        if let Some(p) = w.last_ping_unix_ms {
            let ago = crate::lease::clock::unix_ms().saturating_sub(p);
            line.push_str(&format!(", last ping {:.1} s ago", ago as f64 / 1000.0));
        }
    } else {
        line.push_str(" not armed");
    }
    if let Some(n) = &w.note {
        line.push_str(&format!(" ({n})"));
    }
    line
}

/// One node's line of the cluster view: its instance's role, whether it can be promoted,
/// what its monitor reports, its failed actions.
fn node_line(n: &super::cluster::NodeView) -> String {
    let mut parts = vec![match (n.online, n.standby) {
        (false, _) => "OFFLINE".to_string(),
        (true, true) => format!("{} (node in standby)", n.role),
        (true, false) => n.role.clone(),
    }];
    parts.push(match &n.promotion {
        Some(score) => format!("promotion score {score}"),
        None => "no promotion score".into(),
    });
    for (what, value) in &n.report {
        parts.push(format!("{what}: {value}"));
    }
    for f in &n.failures {
        parts.push(format!("failed {f}"));
    }
    parts.join("; ")
}

fn table(r: &Report) -> String {
    let mut out = String::new();
    let mut row = |k: &str, v: String| out.push_str(&format!("{k:<15} {v}\n"));
    row("resource", r.resource.clone());
    row(
        "parameters",
        match &r.parameters {
            Parameters::Cib => "from the CIB (cibadmin --query)".to_string(),
            Parameters::File(path) => format!("from {}", path.display()),
        },
    );
    row("leader key", r.key.clone());
    let holder = match (&r.etcd.error, &r.etcd.holder) {
        (Some(e), _) => format!("unknown: {e}"),
        (None, None) => "nobody".into(),
        (None, Some(h)) => format!(
            "{h} (lease {}, {} s left)",
            r.etcd.lease_id.as_deref().unwrap_or("?"),
            r.etcd.ttl_left_s.map_or("?".into(), |t| t.to_string())
        ),
    };
    row("etcd holder", holder);
    row(
        "fencing token",
        r.etcd.fencing_token.map_or("-".into(), |t| t.to_string()),
    );
    for w in &r.warnings {
        row("WARNING", w.clone());
    }
    match &r.guard {
        Some(g) => guard_rows(g, &mut row),
        None => row(
            "this node",
            match &r.guard_error {
                Some(e) => format!("{}, but the guard does not answer: {e}", r.local_role),
                None => r.local_role.clone(),
            },
        ),
    }
    match &r.cluster {
        Some(Ok(nodes)) => {
            for n in nodes {
                out.push_str(&format!(
                    "{:<15} {}\n",
                    format!("node {}", n.name),
                    node_line(n)
                ));
            }
        }
        Some(Err(e)) => out.push_str(&format!("{:<15} not shown: {e}\n", "cluster")),
        None => {}
    }
    out
}

/// The service: healthy, UNHEALTHY or not running, and what was last said of it.
fn service_line(g: &GuardStatus) -> String {
    let how = if g.service_healthy {
        "healthy"
    } else if g.service_running {
        "UNHEALTHY"
    } else {
        "not running"
    };
    format!("{how} ({})", g.service_detail)
}

/// The rows of this node's guard: its role, binary, VIPs, service, watchdog, conflicts,
/// losses, an etcd outage, a problem.
fn guard_rows(g: &GuardStatus, row: &mut impl FnMut(&str, String)) {
    let role = serde_json::to_string(&g.role)
        .unwrap_or_default()
        .trim_matches('"')
        .to_string();
    row(
        "this node",
        format!(
            "{} is {} (guard pid {}{})",
            g.node,
            role,
            g.pid,
            g.lease_ttl_left_ms.map_or(String::new(), |t| format!(
                ", lease {:.1} s left",
                t as f64 / 1000.0
            ))
        ),
    );
    row("guard binary", guard_binary(g));
    let word = |present: Option<bool>| match present {
        Some(true) => "present",
        _ => "ABSENT",
    };
    if g.vips.is_empty() {
        // A guard from before extra_vips: its one VIP.
        if let Some(vip) = &g.vip {
            row("VIP", format!("{vip} {}", word(g.vip_present)));
        }
    }
    for v in &g.vips {
        row("VIP", format!("{} {}", v.address, word(v.present)));
    }
    row("service", service_line(g));
    if let Some(w) = &g.watchdog {
        row("watchdog", watchdog_line(w));
    }
    if let Some(c) = &g.vip_conflict {
        let ago = crate::lease::clock::unix_ms().saturating_sub(c.last_unix_ms);
        row(
            "VIP conflict",
            format!(
                "claimed by {} ({}, {} frames, last {:.1} s ago)",
                c.mac,
                c.frame,
                c.frames,
                ago as f64 / 1000.0
            ),
        );
    }
    if let Some(l) = &g.vip_lost {
        row("VIP lost", l.clone());
    }
    if let Some(f) = &g.failsafe {
        let now = crate::lease::clock::unix_ms();
        row(
            "etcd outage",
            f.holding(now).unwrap_or_else(|| {
                format!(
                    "would hold on corosync's proof (etcd last answered {:.1} s ago)",
                    now.saturating_sub(f.etcd_last_seen_unix_ms) as f64 / 1000.0
                )
            }),
        );
    }
    if let Some(c) = &g.clients {
        row("clients", clients_line(c));
    }
    if let Some(space) = &g.etcd_space {
        row(
            "etcd space",
            space.trouble().unwrap_or_else(|| space.text()),
        );
    }
    if let Some(p) = &g.problem {
        row("problem", p.clone());
    }
}

/// The VIP's clients: what the takeover told the last master's, and the record kept for the
/// next master.
fn clients_line(c: &crate::resource::status::ClientsStatus) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &c.told {
        let last = t
            .last_neighbour_ms
            .map(|ms| format!(", the last after {ms} ms"))
            .unwrap_or_default();
        let failed = match t.failed_sends {
            0 => String::new(),
            n => format!(", {n} sends failed"),
        };
        let stopped = if t.stopped {
            ", stopped: the VIP went"
        } else {
            ""
        };
        parts.push(format!(
            "takeover reset {} of {} tickled sessions, {} of {} neighbours answered{last}{failed}\
             {stopped}",
            t.answered, t.tickled, t.neighbours_answered, t.neighbours
        ));
    }
    if let Some(e) = &c.takeover_error {
        parts.push(format!("takeover: {e}"));
    }
    parts.push(format!(
        "{} sessions recorded for the next master ({} bytes{})",
        c.recorded,
        c.record_bytes,
        if c.capped { ", newest left out" } else { "" }
    ));
    if let Some(e) = &c.record_error {
        parts.push(format!("recording: {e}"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(parameters: Parameters) -> Report {
        Report {
            resource: "api".into(),
            parameters,
            key: "/hamaster/prod/api/leader".into(),
            etcd: EtcdView {
                holder: None,
                lease_id: None,
                ttl_left_s: None,
                fencing_token: None,
                error: None,
                unreachable: false,
            },
            local_role: "stopped".into(),
            guard: None,
            guard_error: None,
            cluster: None,
            warnings: Vec::new(),
        }
    }

    fn node(name: &str, role: &str, promotion: Option<&str>) -> super::super::cluster::NodeView {
        super::super::cluster::NodeView {
            name: name.into(),
            online: true,
            role: role.into(),
            promotion: promotion.map(String::from),
            ..Default::default()
        }
    }

    /// During an etcd outage the report says, loudly and first, not to move the master, and
    /// names its node; with etcd up and no standby able to take over, that; otherwise nothing.
    #[test]
    fn the_report_says_what_not_to_do_now() {
        let mut r = report(Parameters::Cib);
        r.cluster = Some(Ok(vec![
            node("n1", "Unpromoted", Some("5")),
            node("n3", "Promoted", Some("100")),
        ]));
        assert!(warnings(&r).is_empty(), "{:?}", warnings(&r));

        r.cluster = Some(Ok(vec![
            node("n1", "Unpromoted", None),
            node("n3", "Promoted", Some("100")),
        ]));
        let w = warnings(&r);
        assert!(
            w.len() == 1 && w[0].starts_with("no standby can be promoted now"),
            "{w:?}"
        );

        // This node's own trouble (a TLS file it cannot read) is no outage.
        r.etcd.error = Some("etcd_cert=/etc/pki/c.crt: cannot read it".into());
        assert!(
            warnings(&r)[0].starts_with("no standby can be promoted now"),
            "{:?}",
            warnings(&r)
        );
        r.etcd.error = Some("etcd unreachable: get leader key: no answer".into());
        r.etcd.unreachable = true;
        r.warnings = warnings(&r);
        assert_eq!(
            r.warnings.len(),
            1,
            "the outage explains the scores: {:?}",
            r.warnings
        );
        assert!(
            r.warnings[0].contains("Do NOT move the master (on n3) now")
                && r.warnings[0].contains("a move is an outage"),
            "{:?}",
            r.warnings
        );
        let text = table(&r);
        assert!(
            text.contains("WARNING         etcd does not answer"),
            "{text}"
        );
        assert!(
            text.contains("node n1         Unpromoted; no promotion score")
                && text.contains("node n3         Promoted; promotion score 100"),
            "{text}"
        );
    }

    #[test]
    fn the_report_says_where_its_parameters_came_from_even_for_a_file_named_cib() {
        let cib = report(Parameters::Cib);
        assert!(table(&cib).contains("parameters      from the CIB (cibadmin --query)\n"));
        let json: serde_json::Value = serde_json::to_value(&cib).unwrap();
        assert_eq!(json["parameters"], "cib");
        let file = report(Parameters::File("cib".into()));
        assert!(table(&file).contains("parameters      from cib\n"));
        let json: serde_json::Value = serde_json::to_value(&file).unwrap();
        assert_eq!(json["parameters"]["file"], "cib");
    }

    /// A guard started from another binary (a package update since its promote) is named as
    /// such, with the way onto the new one; this binary's guard is shown plainly.
    #[test]
    fn a_guard_of_another_release_is_pointed_out() {
        let mut r = report(Parameters::Cib);
        r.guard = Some(GuardStatus {
            protocol: status::PROTOCOL,
            release: status::RELEASE.into(),
            ..GuardStatus::default()
        });
        let ours = format!(
            "guard binary    hamaster {} (protocol {})\n",
            status::RELEASE,
            status::PROTOCOL
        );
        assert!(table(&r).contains(&ours), "{}", table(&r));
        r.guard = Some(GuardStatus::default());
        let text = table(&r);
        assert!(
            text.contains("guard binary    an older hamaster (protocol 0); this binary is")
                && text.contains("`hamaster switchover`"),
            "{text}"
        );
    }

    /// The clients' line: the takeover's account first, then the record kept.
    #[test]
    fn the_clients_told_and_recorded_are_shown() {
        let mut r = report(Parameters::Cib);
        let mut clients = crate::guard::sessions::told(
            Some(2),
            0,
            &[crate::vip::tickle::Report {
                tickled: 2,
                answered: 1,
                neighbours: 2,
                neighbours_answered: 2,
                last_neighbour_ms: Some(12),
                ..Default::default()
            }],
        );
        clients.recorded = 5;
        clients.record_bytes = 150;
        clients.capped = true;
        clients.record_error = Some("writing: etcd unreachable".into());
        r.guard = Some(GuardStatus {
            clients: Some(clients),
            ..GuardStatus::default()
        });
        let text = table(&r);
        assert!(
            text.contains(
                "clients         takeover reset 1 of 2 tickled sessions, 2 of 2 neighbours \
                 answered, the last after 12 ms; 5 sessions recorded for the next master (150 \
                 bytes, newest left out); recording: writing: etcd unreachable"
            ),
            "{text}"
        );
    }
}
