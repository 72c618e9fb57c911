//! The guard's metrics (metrics_address): counters and histograms the guard's tasks add to as
//! things happen, and gauges read from its status at scrape time, written in Prometheus' text
//! exposition format (version 0.0.4). Names follow Prometheus' conventions: the `hamaster_`
//! prefix, base units (`_seconds`), `_total` for counters. docs/metrics.md lists them.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::machine::{Cause, Loss};
use crate::resource::status::{GuardStatus, LastFailure, Role, StandbyReport};

/// Buckets of the renewal and health-check histograms (seconds): a renewal on a LAN takes a
/// few ms; the attempt timeout is at most 2 s.
const BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A histogram with the fixed BUCKETS; the sum kept in microseconds.
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        family(out, name, "histogram", help, []);
        for (i, le) in BUCKETS.iter().enumerate() {
            let n = self.counts[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {n}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Why a keepalive failed, as hamaster_renewal_failures_total's `cause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewalFailure {
    /// etcd (or the connection) answered with an error.
    Error,
    /// No answer within the attempt timeout.
    Timeout,
    /// etcd says the lease no longer exists.
    LeaseGone,
}

impl RenewalFailure {
    const ALL: [RenewalFailure; 3] = [
        RenewalFailure::Error,
        RenewalFailure::Timeout,
        RenewalFailure::LeaseGone,
    ];

    fn label(self) -> &'static str {
        match self {
            RenewalFailure::Error => "error",
            RenewalFailure::Timeout => "timeout",
            RenewalFailure::LeaseGone => "lease_gone",
        }
    }
}

/// What the guard's tasks count. One per guard process; Prometheus sees a counter reset when
/// the next promote starts a new guard.
#[derive(Default)]
pub struct Metrics {
    pub renewals: Histogram,
    renewal_failures: [AtomicU64; RenewalFailure::ALL.len()],
    pub health_checks: Histogram,
    health_failures: AtomicU64,
}

impl Metrics {
    pub fn renewal_failed(&self, why: RenewalFailure) {
        self.renewal_failures[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn health_failed(&self) {
        self.health_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition: counters as counted, gauges from `s` (a live snapshot), `ttl` the lease
    /// TTL in force.
    pub fn render(&self, s: &GuardStatus, ttl: Duration) -> String {
        let mut out = String::with_capacity(6 * 1024);
        let o = &mut out;
        role_and_lease(o, s, ttl);
        self.renewals_and_fences(o, s);
        vips(o, s);
        clients(o, s);
        failsafe(o, s);
        self.service_and_watchdog(o, s);
        out
    }

    fn renewals_and_fences(&self, o: &mut String, s: &GuardStatus) {
        self.renewals.write(
            o,
            "hamaster_renewal_duration_seconds",
            "Time from sending a lease keepalive to etcd's answer.",
        );
        family(
            o,
            "hamaster_renewal_failures_total",
            COUNTER,
            "Lease keepalives that failed, by cause.",
            by("cause", &RenewalFailure::ALL.map(RenewalFailure::label))
                .into_iter()
                .zip(self.renewal_failures.iter().map(load)),
        );
        family(
            o,
            "hamaster_fences_total",
            COUNTER,
            "Times this guard fenced itself (VIP removed, service stopped), by cause.",
            by("cause", &Cause::LABELS)
                .into_iter()
                .zip(Cause::LABELS.map(|c| flag(s.fence_cause.as_deref() == Some(c)))),
        );
        gauge(
            o,
            "hamaster_fencing_token",
            "The leader key's create revision while this guard holds it (0: none).",
            s.fencing_token.unwrap_or(0) as f64,
        );
    }

    fn service_and_watchdog(&self, o: &mut String, s: &GuardStatus) {
        gauge(
            o,
            "hamaster_service_running",
            "1 while the master service runs under this guard.",
            flag(s.service_running),
        );
        gauge(
            o,
            "hamaster_service_healthy",
            "1 while the master service passes its health check.",
            flag(s.service_healthy),
        );
        self.health_checks.write(
            o,
            "hamaster_health_check_duration_seconds",
            "Time the service's health check took.",
        );
        family(
            o,
            "hamaster_health_check_failures_total",
            COUNTER,
            "Health checks that failed.",
            [(String::new(), load(&self.health_failures))],
        );
        let dog = s.watchdog.as_ref();
        gauge(
            o,
            "hamaster_watchdog_armed",
            "1 while the hardware watchdog is armed.",
            flag(dog.is_some_and(|w| w.armed)),
        );
        gauge(
            o,
            "hamaster_watchdog_timeout_seconds",
            "The watchdog's timeout in force (0: not armed).",
            dog.and_then(|w| w.timeout_s).unwrap_or(0) as f64,
        );
    }
}

fn flag(b: bool) -> f64 {
    u64::from(b) as f64
}

fn load(a: &AtomicU64) -> f64 {
    a.load(Ordering::Relaxed) as f64
}

/// One label's values, as label sets.
fn by(label: &str, values: &[&str]) -> Vec<String> {
    values
        .iter()
        .map(|v| format!("{{{label}=\"{v}\"}}"))
        .collect()
}

/// hamaster_build_info of `resource` on `node`, and hamaster_leader: the families the guard and
/// the standby's listener both serve, so that one set of rules reads every node.
fn build_and_leader(o: &mut String, resource: &str, node: &str, leader: bool) {
    let info = format!(
        "{{version=\"{}\",resource=\"{}\",node=\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        escape(resource),
        escape(node)
    );
    family(
        o,
        "hamaster_build_info",
        GAUGE,
        "The running guard's version.",
        [(info, 1.0)],
    );
    gauge(
        o,
        "hamaster_leader",
        "1 while this guard holds the leader key with a live lease and has not fenced.",
        flag(leader),
    );
}

/// The build, the role, the lease.
fn role_and_lease(o: &mut String, s: &GuardStatus, ttl: Duration) {
    build_and_leader(
        o,
        &s.resource,
        &s.node,
        s.role == Role::Leader && s.lease_ttl_left_ms.is_some_and(|t| t > 0),
    );
    let roles = Role::ALL.map(Role::name);
    family(
        o,
        "hamaster_guard_role",
        GAUGE,
        "The guard's role (1 for the one it has).",
        by("role", &roles)
            .into_iter()
            .zip(Role::ALL.map(|r| flag(s.role == r))),
    );
    gauge(
        o,
        "hamaster_lease_ttl_seconds",
        "The lease's TTL in force.",
        ttl.as_secs_f64(),
    );
    gauge(
        o,
        "hamaster_lease_remaining_seconds",
        "Lease time left as this guard reckons it (0 when it holds none).",
        s.lease_ttl_left_ms.unwrap_or(0) as f64 / 1000.0,
    );
}

/// The VIP's clients (guard::sessions): the record kept for the next master, and what this
/// leadership's takeover told the last master's clients (absent before it did).
fn clients(o: &mut String, s: &GuardStatus) {
    let Some(c) = &s.clients else {
        return;
    };
    gauge(
        o,
        "hamaster_sessions_recorded",
        "Connections to the VIP in the last record written to etcd for the next master.",
        c.recorded as f64,
    );
    gauge(
        o,
        "hamaster_sessions_record_bytes",
        "Size of the last record of the VIP's connections written to etcd.",
        c.record_bytes as f64,
    );
    family(
        o,
        "hamaster_sessions_record_writes_total",
        COUNTER,
        "Writes of the record of the VIP's connections to etcd.",
        [(String::new(), c.writes as f64)],
    );
    let Some(t) = &c.told else {
        return;
    };
    gauge(
        o,
        "hamaster_takeover_sessions_tickled",
        "Connections of the last master tickled after this takeover.",
        t.tickled as f64,
    );
    gauge(
        o,
        "hamaster_takeover_sessions_reset",
        "Tickled connections whose client answered, so that this node reset them.",
        t.answered as f64,
    );
    gauge(
        o,
        "hamaster_takeover_neighbors_asked",
        "Neighbours (clients on the link, gateways) asked from the VIP after this takeover.",
        t.neighbours as f64,
    );
    gauge(
        o,
        "hamaster_takeover_neighbors_answered",
        "Neighbours that answered, so that they send to this node's MAC now.",
        t.neighbours_answered as f64,
    );
    gauge(
        o,
        "hamaster_takeover_failed_sends",
        "Tickles and requests the kernel refused to send after this takeover.",
        t.failed_sends as f64,
    );
    if let Some(ms) = t.last_neighbour_ms {
        gauge(
            o,
            "hamaster_takeover_last_neighbor_seconds",
            "From the first round to the last neighbour's answer.",
            ms as f64 / 1000.0,
        );
    }
}

/// Each VIP: present, claimed by others, lost.
fn vips(o: &mut String, s: &GuardStatus) {
    gauge(
        o,
        "hamaster_vip_present",
        "1 while every VIP is on its interface here (0 without a VIP).",
        flag(s.vip_present == Some(true)),
    );
    let address =
        |v: &crate::resource::status::VipSeen| format!("{{address=\"{}\"}}", escape(&v.address));
    family(
        o,
        "hamaster_vip_address_present",
        GAUGE,
        "1 while this VIP (ip or one of extra_vips) is on its interface here.",
        s.vips
            .iter()
            .map(|v| (address(v), flag(v.present == Some(true)))),
    );
    family(
        o,
        "hamaster_vip_address_conflicts_total",
        COUNTER,
        "Frames that claimed this VIP for another MAC address.",
        s.vips
            .iter()
            .map(|v| (address(v), v.conflict_frames as f64)),
    );
    family(
        o,
        "hamaster_vip_conflicts_total",
        COUNTER,
        "Frames that claimed any of the VIPs for another MAC address.",
        [(
            String::new(),
            s.vip_conflict.as_ref().map_or(0, |c| c.frames) as f64,
        )],
    );
    family(
        o,
        "hamaster_vip_lost_total",
        COUNTER,
        "The VIP lost behind the guard's back, by what happened.",
        by("what", &Loss::ALL.map(Loss::label))
            .into_iter()
            .zip(Loss::ALL.map(|l| s.vip_losses.get(l.label()).copied().unwrap_or(0) as f64)),
    );
}

/// Holding through an etcd outage.
fn failsafe(o: &mut String, s: &GuardStatus) {
    let now = crate::lease::clock::unix_ms();
    let fs = s.failsafe.as_ref();
    let holding = fs.and_then(|f| f.holding_since_unix_ms);
    gauge(
        o,
        "hamaster_failsafe_active",
        "1 while the guard holds the master through an etcd outage on corosync's proof.",
        flag(holding.is_some()),
    );
    gauge(
        o,
        "hamaster_failsafe_held_seconds",
        "How long the current hold through an etcd outage has lasted (0: none).",
        holding.map_or(0.0, |h| now.saturating_sub(h) as f64 / 1000.0),
    );
    // The failsafe's record where there is one (a key taken back counts), else the last
    // renewal: with etcd_outage=fence or without fencing too.
    let seen = fs
        .map(|f| f.etcd_last_seen_unix_ms)
        .into_iter()
        .chain(s.last_renewal_unix_ms)
        .max();
    gauge(
        o,
        "hamaster_etcd_last_seen_seconds",
        "Seconds since etcd last answered the guard (a renewal, or the key taken back).",
        seen.map_or(0.0, |t| now.saturating_sub(t) as f64 / 1000.0),
    );
    etcd_space(o, s);
}

/// The alarms etcd raises and its database's size, as the guard last looked (guard::space).
fn etcd_space(o: &mut String, s: &GuardStatus) {
    let space = s.etcd_space.clone().unwrap_or_default();
    alarms(o, &space.alarms);
    gauge(
        o,
        "hamaster_etcd_db_size_bytes",
        "The largest etcd member's database, as the guard last looked.",
        space.db_size_bytes as f64,
    );
    gauge(
        o,
        "hamaster_etcd_db_quota_bytes",
        "etcd's database quota where etcd says it (3.6 and later; 0: not said).",
        space.quota_bytes.unwrap_or(0) as f64,
    );
}

/// How old a standby's report may be and still be served as what is: several monitor
/// intervals at README's (11 s) and at Pacemaker's slowest usual settings.
pub const STANDBY_REPORT_FRESH_MS: u64 = 120_000;

/// What the standby's listener (guard::exporter) serves while this node's instance runs
/// unpromoted: the same build, leader and alarm families as a guard's, so that one scrape
/// configuration and one set of rules cover every node, and what the last monitor found.
pub fn render_standby(
    resource: &str,
    node: &str,
    report: Option<&StandbyReport>,
    last: Option<&LastFailure>,
    now_unix_ms: u64,
) -> String {
    let mut out = String::with_capacity(2 * 1024);
    let o = &mut out;
    build_and_leader(o, resource, node, false);
    gauge(
        o,
        "hamaster_standby",
        "1: this node's instance runs unpromoted; these metrics are the standby listener's.",
        1.0,
    );
    if let Some(r) = report {
        let age_ms = now_unix_ms.saturating_sub(r.at_unix_ms);
        gauge(
            o,
            "hamaster_standby_report_age_seconds",
            "Since the unpromoted monitor last looked (every monitor interval).",
            age_ms as f64 / 1000.0,
        );
    }
    // What a monitor found long ago (monitors stopped: maintenance, an unmanaged resource) is
    // not said as now: only its age.
    if let Some(r) =
        report.filter(|r| now_unix_ms.saturating_sub(r.at_unix_ms) <= STANDBY_REPORT_FRESH_MS)
    {
        gauge(
            o,
            "hamaster_promotable",
            "1 while this standby can be promoted (etcd answers, its watchdog and VIP interface are there).",
            flag(r.unpromotable.is_none()),
        );
        if let Some((answering, asked)) = r.etcd_members {
            gauge(
                o,
                "hamaster_etcd_reachable",
                "1 while at least one etcd member answered this node's last look.",
                flag(answering > 0),
            );
            gauge(
                o,
                "hamaster_etcd_members_answering",
                "etcd members that answered this node's last look.",
                answering as f64,
            );
            gauge(
                o,
                "hamaster_etcd_members",
                "etcd members this node asked (etcd_endpoints).",
                asked as f64,
            );
        }
        alarms(o, &r.etcd_alarms);
    }
    if let Some(f) = last {
        gauge(
            o,
            "hamaster_last_failure_timestamp_seconds",
            "When this node's instance last failed (a promote, a promoted monitor), Unix time.",
            f.at_unix_ms as f64 / 1000.0,
        );
    }
    out
}

/// hamaster_etcd_alarm: each alarm that stops a takeover, 1 while raised.
fn alarms(o: &mut String, raised: &[String]) {
    family(
        o,
        "hamaster_etcd_alarm",
        GAUGE,
        "1 while an etcd member reports this alarm (NOSPACE, CORRUPT: no node can take the key).",
        ["NOSPACE", "CORRUPT"].map(|a| {
            (
                format!("{{alarm=\"{a}\"}}"),
                flag(raised.iter().any(|x| x == a)),
            )
        }),
    );
}

const GAUGE: &str = "gauge";
const COUNTER: &str = "counter";

/// One metric family: its HELP and TYPE lines, then a sample per (labels, value); labels are
/// written as `{name="value"}`, or empty for none.
fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (String, f64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

/// A family of one unlabelled gauge.
fn gauge(out: &mut String, name: &str, help: &str, v: f64) {
    family(out, name, GAUGE, help, [(String::new(), v)]);
}

/// A label value as the text format wants it: backslash, quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_into_every_bucket_at_or_above_the_value() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(700));
        let mut out = String::new();
        h.write(&mut out, "x_seconds", "help");
        assert!(out.contains("x_seconds_bucket{le=\"0.0025\"} 0\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"0.005\"} 1\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"1\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"+Inf\"} 2\n"), "{out}");
        assert!(
            out.contains("x_seconds_sum 0.703\nx_seconds_count 2\n"),
            "{out}"
        );
    }

    #[test]
    fn the_clients_are_shown_once_recorded_and_the_takeover_once_it_told_them() {
        let m = Metrics::default();
        let mut s = GuardStatus::default();
        let text = m.render(&s, Duration::from_secs(10));
        assert!(!text.contains("hamaster_sessions_"), "{text}");
        s.clients = Some(crate::resource::status::ClientsStatus {
            recorded: 2,
            record_bytes: 64,
            writes: 3,
            ..Default::default()
        });
        let text = m.render(&s, Duration::from_secs(10));
        assert!(text.contains("hamaster_sessions_recorded 2\n"), "{text}");
        assert!(
            text.contains("hamaster_sessions_record_writes_total 3\n"),
            "{text}"
        );
        assert!(!text.contains("hamaster_takeover_"), "{text}");
        let told = crate::guard::sessions::told(
            Some(3),
            1,
            &[crate::vip::tickle::Report {
                tickled: 2,
                answered: 2,
                neighbours: 2,
                neighbours_answered: 1,
                last_neighbour_ms: Some(40),
                failed_sends: 1,
                ..Default::default()
            }],
        );
        s.clients.as_mut().unwrap().told = told.told;
        let text = m.render(&s, Duration::from_secs(10));
        assert!(
            text.contains("hamaster_takeover_failed_sends 1\n"),
            "{text}"
        );
        assert!(
            text.contains("hamaster_takeover_sessions_reset 2\n"),
            "{text}"
        );
        assert!(
            text.contains("hamaster_takeover_neighbors_answered 1\n"),
            "{text}"
        );
        assert!(
            text.contains("hamaster_takeover_last_neighbor_seconds 0.04\n"),
            "{text}"
        );
    }

    #[test]
    fn a_fence_counts_once_under_its_cause_and_the_leader_gauge_follows_the_lease() {
        let m = Metrics::default();
        m.renewal_failed(RenewalFailure::Timeout);
        let mut s = GuardStatus {
            resource: "api\"x".into(),
            role: Role::Leader,
            lease_ttl_left_ms: Some(4000),
            ..GuardStatus::default()
        };
        let text = m.render(&s, Duration::from_secs(10));
        assert!(text.contains("hamaster_leader 1\n"), "{text}");
        assert!(text.contains("resource=\"api\\\"x\""), "{text}");
        assert!(text.contains("hamaster_renewal_failures_total{cause=\"timeout\"} 1\n"));
        assert!(text.contains("hamaster_fences_total{cause=\"deadline\"} 0\n"));
        s.role = Role::Fenced;
        s.lease_ttl_left_ms = Some(0);
        s.fence_cause = Some("deadline".into());
        let text = m.render(&s, Duration::from_secs(10));
        assert!(text.contains("hamaster_leader 0\n"), "{text}");
        assert!(text.contains("hamaster_fences_total{cause=\"deadline\"} 1\n"));
        assert!(text.contains("hamaster_guard_role{role=\"fenced\"} 1\n"));
        assert!(text.contains("hamaster_lease_ttl_seconds 10\n"));
    }
}
