//! The VIP's clients across a takeover (issue 53): while it leads, the guard records the
//! VIP's established TCP connections where the next master can read them after a crash; the
//! next master, its VIP settled (the machine's Order::Repoint), tells the clients the last
//! master left (vip::tickle) — all but those it owns itself.
//!
//! **Where:** a lease-less key beside the leader key, `{scope}/{resource}/sessions`, written
//! in one transaction that compares the leader key's lease with ours: only the holder writes,
//! and the record outlives its writer's lease (a crash is what it is for). Not in the leader
//! key's value (every renewal would rewrite it; agents read the holder from it) nor on local
//! disk (a crashed node's disk is out of reach).
//!
//! **What and how often:** a sample every SAMPLE_EVERY; a connection is recorded once two
//! samples in a row saw it (a request that comes and goes within a second is no idle client:
//! if it is cut mid-flight its own retransmission finds the new master); a write only when that
//! set changed, so at most one a second, none while it stands still. One line per connection,
//! `VIP:PORT PEER:PORT`, 20 to 44 bytes (IPv4; up to 96 for IPv6); oldest first, at
//! most MAX_SESSIONS (at most 44 KiB for IPv4, 96 KiB for IPv6): past it the newest are left out, said in the log and the status, and they wait for
//! their own timeouts as without hamaster.
//!
//! **The next master** reads the record as soon as it holds the key (before its own recorder
//! could overwrite it: that one writes two samples after the VIP is up), and an error or a
//! silent etcd only means no client is told, never a slower raise.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::fence::Fence;
use super::status::Shared;
use crate::lease::{Etcd, LeaseId};
use crate::resource::status::ClientsStatus;
use crate::vip::tickle::Conn;

/// Between two samples of the VIP's connections.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Connections recorded at most.
pub const MAX_SESSIONS: usize = 1024;
/// The longest pause after samples that failed in a row (the pause doubles from SAMPLE_EVERY
/// with each failure): a kernel without inet_diag whose module cannot be loaded refuses every
/// sample, and every try has the kernel run modprobe for it.
pub const SAMPLE_RETRY_MAX: Duration = Duration::from_secs(64);
/// How long the next master waits for the record at the takeover, at most.
pub const READ_LIMIT: Duration = Duration::from_secs(1);

/// `{scope}/{resource}/sessions`, next to the leader key (`EtcdConfig::scope`).
pub fn key(scope: &str, resource: &str) -> String {
    format!("{}/{resource}/sessions", scope.trim_end_matches('/'))
}

/// The record's text: one `LOCAL PEER` line per connection.
pub fn encode(conns: &[Conn]) -> Vec<u8> {
    let mut out = String::with_capacity(conns.len() * 32);
    for c in conns {
        out.push_str(&format!("{} {}\n", c.local, c.peer));
    }
    out.into_bytes()
}

/// The connections of a record; a line that is not two socket addresses of one family is
/// skipped (a record is advice, never trusted to be well formed).
pub fn decode(bytes: &[u8]) -> Vec<Conn> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let local: SocketAddr = words.next()?.parse().ok()?;
            let peer: SocketAddr = words.next()?.parse().ok()?;
            (words.next().is_none() && local.is_ipv4() == peer.is_ipv4())
                .then_some(Conn { local, peer })
        })
        .take(MAX_SESSIONS)
        .collect()
}

/// Which samples are worth a write (pure: the recorder's loop feeds it).
#[derive(Debug, Default)]
pub struct Recorder {
    /// The sample before (None before the first: the first sample says nothing).
    previous: Option<BTreeSet<Conn>>,
    written: Option<Vec<Conn>>,
    /// The last sample had more than MAX_SESSIONS stable connections.
    pub capped: bool,
    /// Samples failed in a row, and when the next may be taken.
    failures: u32,
    quiet_until: Option<std::time::Instant>,
}

impl Recorder {
    /// One sample, oldest first: what to write when the connections seen in this sample and
    /// the one before, the oldest MAX_SESSIONS, differ from what was last written.
    pub fn sample(&mut self, seen: &[Conn]) -> Option<Vec<Conn>> {
        let previous = self.previous.replace(seen.iter().copied().collect())?;
        let stable: Vec<Conn> = seen
            .iter()
            .filter(|c| previous.contains(c))
            .copied()
            .collect();
        self.capped = stable.len() > MAX_SESSIONS;
        let kept: Vec<Conn> = stable.into_iter().take(MAX_SESSIONS).collect();
        (self.written.as_ref() != Some(&kept)).then_some(kept)
    }

    /// Whether a sample is due at `now` (not while pausing after failed ones).
    pub fn due(&self, now: std::time::Instant) -> bool {
        self.quiet_until.is_none_or(|t| now >= t)
    }

    /// A sample failed at `now`: the next waits SAMPLE_EVERY, doubled with each failure in a
    /// row, at most SAMPLE_RETRY_MAX; the sample before no longer counts (a connection must be
    /// seen in two samples in a row). Returns the pause.
    pub fn failed(&mut self, now: std::time::Instant) -> Duration {
        self.previous = None;
        self.failures = self.failures.saturating_add(1);
        let pause = SAMPLE_EVERY
            .saturating_mul(1 << self.failures.saturating_sub(1).min(16))
            .min(SAMPLE_RETRY_MAX);
        self.quiet_until = Some(now + pause);
        pause
    }

    /// A sample succeeded: samples every SAMPLE_EVERY again.
    pub fn sampled(&mut self) {
        self.failures = 0;
        self.quiet_until = None;
    }

    /// `set` is in etcd now.
    pub fn written(&mut self, set: Vec<Conn>) {
        self.written = Some(set);
    }

    /// Recording is off: the empty record to write, unless it was written already; samples
    /// start afresh when it is on again.
    pub fn emptied(&mut self) -> Option<Vec<Conn>> {
        self.previous = None;
        self.capped = false;
        (self.written.as_deref() != Some(&[])).then(Vec::new)
    }
}

/// The VIP's established connections now, as (VIP's end, peer's end), oldest first.
fn established(vips: &[IpAddr]) -> Result<Vec<Conn>, String> {
    let mut out = Vec::new();
    for vip in vips {
        let found =
            crate::vip::sessions::established(*vip).map_err(|e| match e.raw_os_error() {
                // The kernel's answer where it has no sock_diag for TCP and could not load it.
                Some(libc::ENOENT) => format!(
                    "{vip}: the kernel cannot list TCP connections (sock_diag: {e}: the tcp_diag \
                 module is not loaded and could not be)"
                ),
                _ => format!("{vip}: {e}"),
            })?;
        out.extend(found.into_iter().map(|s| Conn {
            local: s.local,
            peer: s.peer,
        }));
    }
    Ok(out)
}

/// While this leadership leads with its VIPs up (not while it holds through an etcd outage:
/// a write could not land): a sample every SAMPLE_EVERY, written beside `leader_key` (while it
/// carries `lease`) when the recorder says so; with tickle and repoint_neighbors both off, an
/// empty record once (no client's address is kept). Runs until aborted.
pub async fn record(
    etcd: Etcd,
    leader_key: String,
    lease: LeaseId,
    at: String,
    vips: Vec<IpAddr>,
    fence: Fence,
    shared: Shared,
) {
    let mut recorder = Recorder::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut said_capped = false;
    // The last error said in the log (said again only when it changes).
    let mut said: Option<String> = None;
    loop {
        tick.tick().await;
        let view = fence.view();
        if view.state.phase() != super::machine::Phase::Leading
            || view.vip != super::machine::VipState::Up
        {
            continue;
        }
        let Some(set) = next_record(&mut recorder, &vips, &shared, &mut said, &at).await else {
            continue;
        };
        if recorder.capped && !said_capped {
            said_capped = true;
            log::warn!("{at}: more than {MAX_SESSIONS} connections on the VIP: the newest are not recorded");
        }
        let value = encode(&set);
        let bytes = value.len();
        let r = tokio::time::timeout(
            SAMPLE_EVERY,
            etcd.put_while_held(&leader_key, lease, &at, value),
        )
        .await;
        match r {
            Ok(Ok(true)) => {
                let (n, capped) = (set.len(), recorder.capped);
                recorder.written(set);
                ok(&shared, &mut said);
                shared.update(|s| {
                    let c = s.clients.get_or_insert_with(Default::default);
                    c.recorded = n;
                    c.record_bytes = bytes;
                    c.recorded_at_unix_ms = Some(crate::lease::clock::unix_ms());
                    c.writes += 1;
                    c.capped = capped;
                });
            }
            // The key is not ours (any more): nothing is written; the machine hears it from
            // the watch and the confirms.
            Ok(Ok(false)) => {}
            Ok(Err(e)) => failed(&shared, &mut said, &at, format!("writing: {e}")),
            Err(_) => {
                let e = format!("writing: no answer within {SAMPLE_EVERY:?}");
                failed(&shared, &mut said, &at, e);
            }
        }
    }
}

/// What to write now, if anything: the recorder's verdict on a fresh sample, or the empty
/// record once tickle and repoint_neighbors (as last reloaded) are both off.
async fn next_record(
    recorder: &mut Recorder,
    vips: &[IpAddr],
    shared: &Shared,
    said: &mut Option<String>,
    at: &str,
) -> Option<Vec<Conn>> {
    let wanted = shared.config.borrow().clients;
    if !wanted.tickle && !wanted.repoint_neighbors {
        return recorder.emptied();
    }
    if !recorder.due(std::time::Instant::now()) {
        return None;
    }
    let list = vips.to_vec();
    let seen = match tokio::task::spawn_blocking(move || established(&list)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let pause = recorder.failed(std::time::Instant::now());
            failed(
                shared,
                said,
                at,
                format!("{e} (sampled again in {} s)", pause.as_secs()),
            );
            return None;
        }
        Err(_) => return None,
    };
    recorder.sampled();
    let set = recorder.sample(&seen);
    if set.is_none() {
        ok(shared, said);
    }
    set
}

/// A sample or a write failed: in the status, and in the log when it says something new.
fn failed(shared: &Shared, said: &mut Option<String>, at: &str, e: String) {
    if said.as_deref() != Some(e.as_str()) {
        log::warn!("{at}: recording the VIP's sessions: {e}");
        *said = Some(e.clone());
    }
    shared.update(|s| s.clients.get_or_insert_with(Default::default).record_error = Some(e));
}

/// A sample was taken (and written where it changed): no error to show.
fn ok(shared: &Shared, said: &mut Option<String>) {
    if said.take().is_some() {
        shared.update(|s| {
            if let Some(c) = s.clients.as_mut() {
                c.record_error = None;
            }
        });
    }
}

/// The record the last master left, read as the leadership begins (None: none, or etcd could
/// not say within READ_LIMIT: no client is told).
pub async fn read_left(etcd: Etcd, at: String) -> Result<Vec<Conn>, String> {
    match tokio::time::timeout(READ_LIMIT, etcd.read_record(&at)).await {
        Ok(Ok(r)) => Ok(r.value.as_deref().map(decode).unwrap_or_default()),
        Ok(Err(e)) => Err(format!("reading {at}: {e}")),
        Err(_) => Err(format!("reading {at}: no answer within {READ_LIMIT:?}")),
    }
}

/// What to tell for the VIP `vip` up on interface (`index`, `mac`): the connections of `left`
/// on it but those in `owned` (this node's own: a warm standby's service, a client that
/// reconnected) and those from `local` addresses (this node's own, the VIP's included), and
/// the neighbours to repoint (with `repoint`) among their peers and the link's gateways, from
/// the family's `routes`.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    vip: IpAddr,
    link: (u32, Option<[u8; 6]>),
    left: &[Conn],
    owned: &BTreeSet<Conn>,
    local: &BTreeSet<IpAddr>,
    routes: &[crate::vip::netlink::Route],
    tickle: bool,
    repoint: bool,
) -> crate::vip::tickle::Plan {
    let on_vip: Vec<Conn> = left
        .iter()
        .filter(|c| c.local.ip() == vip && c.peer.ip() != vip && !local.contains(&c.peer.ip()))
        .copied()
        .collect();
    let peers: Vec<IpAddr> = on_vip
        .iter()
        .map(|c| c.peer.ip())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    crate::vip::tickle::Plan {
        vip,
        link: link.1.map(|mac| (link.0, mac)),
        conns: match tickle {
            true => on_vip.into_iter().filter(|c| !owned.contains(c)).collect(),
            false => Vec::new(),
        },
        neighbours: match repoint {
            true => crate::vip::tickle::neighbours(routes, link.0, &peers),
            false => Vec::new(),
        },
    }
}

/// The status's account of a takeover's rounds: `reports` summed.
pub fn told(
    left: Option<usize>,
    owned: usize,
    reports: &[crate::vip::tickle::Report],
) -> ClientsStatus {
    let mut sum = crate::vip::tickle::Report::default();
    for r in reports {
        sum.tickled += r.tickled;
        sum.answered += r.answered;
        sum.neighbours += r.neighbours;
        sum.neighbours_answered += r.neighbours_answered;
        sum.last_neighbour_ms = sum.last_neighbour_ms.max(r.last_neighbour_ms);
        sum.last_answer_ms = sum.last_answer_ms.max(r.last_answer_ms);
        sum.rounds = sum.rounds.max(r.rounds);
        sum.failed_sends += r.failed_sends;
        sum.stopped |= r.stopped;
        sum.errors.extend(r.errors.iter().cloned());
    }
    ClientsStatus {
        left,
        owned,
        told: Some(sum),
        ..ClientsStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(l: &str, p: &str) -> Conn {
        Conn {
            local: l.parse().unwrap(),
            peer: p.parse().unwrap(),
        }
    }

    #[test]
    fn a_record_reads_back_and_bad_lines_are_skipped() {
        let set = vec![
            conn("192.0.2.10:443", "192.0.2.99:40000"),
            conn("[2001:db8::10]:443", "[2001:db8::99]:40001"),
        ];
        let text = encode(&set);
        assert_eq!(
            String::from_utf8_lossy(&text),
            "192.0.2.10:443 192.0.2.99:40000\n[2001:db8::10]:443 [2001:db8::99]:40001\n"
        );
        assert_eq!(decode(&text), set);
        let mut bad = text.clone();
        bad.extend_from_slice(
            b"garbage\n192.0.2.10:443\n192.0.2.10:443 [2001:db8::1]:1\n1.2.3.4:1 5.6.7.8:2 x\n",
        );
        assert_eq!(decode(&bad), set);
        assert_eq!(decode(b""), vec![]);
    }

    #[test]
    fn only_connections_seen_twice_are_written_and_only_when_they_changed() {
        let (a, b, c) = (
            conn("192.0.2.10:443", "192.0.2.99:1"),
            conn("192.0.2.10:443", "192.0.2.99:2"),
            conn("192.0.2.10:443", "192.0.2.99:3"),
        );
        let mut r = Recorder::default();
        // The first sample says nothing (the last master's record stays until the second).
        assert_eq!(r.sample(&[a, b]), None);
        assert_eq!(r.sample(&[a, b]), Some(vec![a, b]));
        r.written(vec![a, b]);
        // Unchanged: no write.
        assert_eq!(r.sample(&[a, b]), None);
        // c only once, then gone: never written.
        assert_eq!(r.sample(&[a, b, c]), None);
        assert_eq!(r.sample(&[a, b]), None);
        // b closed: written without it.
        assert_eq!(r.sample(&[a]), Some(vec![a]));
        // A write that failed is tried again at the next sample.
        assert_eq!(r.sample(&[a]), Some(vec![a]));
        r.written(vec![a]);
        // Turned off: the empty record, once; on again: two samples before a write.
        assert_eq!(r.emptied(), Some(vec![]));
        r.written(vec![]);
        assert_eq!(r.emptied(), None);
        assert_eq!(r.sample(&[a]), None);
        assert_eq!(r.sample(&[a]), Some(vec![a]));
    }

    #[test]
    fn failed_samples_pause_longer_each_time_and_a_good_one_resumes_every_second() {
        let a = conn("192.0.2.10:443", "192.0.2.99:40000");
        let mut r = Recorder::default();
        let t0 = std::time::Instant::now();
        assert!(r.due(t0));
        assert_eq!(r.sample(&[a]), None);
        let pauses: Vec<u64> = (0..9).map(|_| r.failed(t0).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
        assert!(!r.due(t0 + Duration::from_secs(63)));
        assert!(r.due(t0 + SAMPLE_RETRY_MAX));
        // The sample before the failures no longer counts: two good samples before a write.
        r.sampled();
        assert!(r.due(t0));
        assert_eq!(r.sample(&[a]), None);
        assert_eq!(r.sample(&[a]), Some(vec![a]));
        assert_eq!(r.failed(t0).as_secs(), 1, "counted afresh");
    }

    #[test]
    fn past_the_cap_the_oldest_are_kept() {
        let all: Vec<Conn> = (0..(MAX_SESSIONS as u16 + 10))
            .map(|p| conn("192.0.2.10:443", &format!("192.0.2.99:{}", p + 1)))
            .collect();
        let mut r = Recorder::default();
        r.sample(&all);
        let kept = r.sample(&all).unwrap();
        assert!(r.capped);
        assert_eq!(kept.len(), MAX_SESSIONS);
        assert_eq!(kept[..], all[..MAX_SESSIONS]);
        // A full record at its widest: 44 KiB for IPv4, 96 KiB for IPv6 (etcd takes 1.5 MiB
        // a request by default).
        for (addr, most) in [
            ("255.255.255.255:65535", 44 * 1024),
            ("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535", 96 * 1024),
        ] {
            let widest: Vec<Conn> = (0..MAX_SESSIONS).map(|_| conn(addr, addr)).collect();
            let size = encode(&widest).len();
            assert!(size <= most, "{addr}: {size}");
        }
    }

    #[test]
    fn the_plan_leaves_out_what_this_node_owns_and_other_vips() {
        let left = vec![
            conn("192.0.2.10:443", "192.0.2.99:1"),
            conn("192.0.2.10:443", "192.0.2.98:2"),
            conn("192.0.2.11:443", "192.0.2.97:3"),
        ];
        let owned: BTreeSet<Conn> = [left[1]].into_iter().collect();
        let local: BTreeSet<IpAddr> = ["192.0.2.97".parse().unwrap()].into_iter().collect();
        let mut with_local = left.clone();
        with_local.push(conn("192.0.2.10:443", "192.0.2.97:4"));
        with_local.push(conn("192.0.2.10:443", "192.0.2.10:5"));
        let p = plan(
            "192.0.2.10".parse().unwrap(),
            (2, Some([2, 0, 0, 0, 0, 1])),
            &with_local,
            &owned,
            &local,
            &[],
            true,
            true,
        );
        // Neither owned, nor another VIP's, nor from this node's own addresses.
        assert_eq!(p.conns, vec![left[0]]);
        // No route through the link: no neighbour is on it.
        assert!(p.neighbours.is_empty());
        let off = plan(
            "192.0.2.10".parse().unwrap(),
            (2, None),
            &left,
            &owned,
            &BTreeSet::new(),
            &[],
            false,
            false,
        );
        assert!(off.conns.is_empty() && off.link.is_none());
    }
}
