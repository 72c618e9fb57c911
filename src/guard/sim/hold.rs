//! The failsafe world of a schedule: corosync's answers over time, the successor's looks
//! and when it may take over (a holding n1's cluster, as its peers see it).

use super::*;

impl HoldSchedule {
    pub(super) fn draw(rng: &mut Rng) -> HoldSchedule {
        let nodes = if rng.chance(0.4) { 2 } else { 3 };
        // The lab's token 1000 (3.68 s on three nodes), RHEL's 3000, one tuned for speed.
        let membership_time = match rng.next() % 3 {
            0 => Duration::from_millis(3680),
            1 => Duration::from_millis(8030),
            _ => Duration::from_millis(1200),
        };
        let skew = membership_time;
        let lasts = |rng: &mut Rng| (!rng.chance(0.3)).then(|| rng.ms(500, 40_000));
        HoldSchedule {
            nodes,
            membership_time,
            quorum_loss: rng.chance(0.4).then(|| {
                let from = rng.ms(0, 40_000);
                (from, from + rng.ms(1_000, 45_000))
            }),
            quorum_answer: if rng.chance(0.5) {
                Member::Refusing
            } else {
                Member::Silent
            },
            partition: rng.chance(0.35).then(|| {
                let at = rng.ms(0, 60_000);
                let l = lasts(rng);
                Cut::draw(rng, at, skew, l)
            }),
            third_away: (nodes == 3 && rng.chance(0.2)).then(|| {
                let at = rng.ms(0, 60_000);
                let l = lasts(rng);
                Cut::draw(rng, at, skew, l)
            }),
            corosync_frozen: rng.chance(0.15).then(|| {
                let at = rng.ms(0, 60_000);
                let l = lasts(rng);
                // Stopped, n1's corosync answers nothing; resumed, it has missed the ring and
                // finds itself alone until it merges again.
                Cut {
                    seen_a: Duration::ZERO,
                    ..Cut::draw(rng, at, skew, l)
                }
            }),
            answer_max: if rng.chance(0.8) {
                Duration::from_millis(60)
            } else {
                Duration::from_millis(1_500)
            },
            successor_rate: rate(rng, 1.0 + MAX_SLEW),
            pacemaker: PacemakerSchedule::draw(rng),
            successor_outside: rng.chance(0.1),
            pause: None,
        }
    }

    /// What corosync on n1 (`a`) or on the successor shows at `t`.
    pub(super) fn view(&self, a: bool, t: Duration) -> Cluster {
        let cut = |c: &Option<Cut>| c.is_some_and(|c| c.in_view(a, t));
        let apart = cut(&self.partition);
        // n1's corosync stopped (or n1 paused): the others drop it; n1 answers nothing
        // meanwhile, and alone after it resumes (a paused one after its stale answers), until
        // they merge.
        let paused = self.pause.map(|p| p.cut());
        let n1_gone = apart || cut(&self.corosync_frozen) || cut(&paused);
        let mut members = vec![if a { 1 } else { 2 }];
        if !n1_gone {
            members.push(if a { 2 } else { 1 });
        }
        if self.nodes == 3 && !cut(&self.third_away) && !(a && n1_gone) {
            members.push(3);
        }
        members.sort_unstable();
        let quorate = match self.nodes {
            2 => true,
            _ => members.len() >= 2,
        };
        let mut changes: Vec<Duration> = [
            &self.partition,
            &self.third_away,
            &self.corosync_frozen,
            &paused,
        ]
        .into_iter()
        .flatten()
        .flat_map(Cut::changes)
        .filter(|c| *c <= t)
        .collect();
        changes.sort_unstable();
        Cluster {
            quorate,
            ring: format!("1.{}", changes.len()),
            me: if a { 1 } else { 2 },
            members,
            nodelist: (1..=self.nodes)
                .map(|id| Node {
                    id: Some(id),
                    name: format!("n{id}"),
                })
                .collect(),
            name: Some("lab".into()),
            membership_time: Some(self.membership_time),
        }
    }

    /// What the successor's corosync shows at `t`: the cluster's view, or, outside it, a
    /// one-node cluster of its own.
    pub(super) fn successor_view(&self, t: Duration) -> Cluster {
        if !self.successor_outside {
            return self.view(false, t);
        }
        Cluster {
            quorate: true,
            ring: "7.1".into(),
            me: 7,
            members: vec![7],
            nodelist: vec![Node {
                id: Some(7),
                name: "dr1".into(),
            }],
            name: Some("dr".into()),
            membership_time: Some(self.membership_time),
        }
    }

    /// When the DC (in the successor's partition) decides to fence n1: n1 left its
    /// membership, or n1's controller died (seen `dc_lag` later) — while fencing is on then.
    pub(super) fn fence_decided_at(&self) -> Option<Duration> {
        let p = &self.pacemaker;
        let paused = self.pause.map(|p| p.cut());
        let left = [&self.partition, &self.corosync_frozen, &paused]
            .into_iter()
            .flatten()
            .map(|c| c.at + c.seen_b);
        let died = p.controller_dies.map(|d| d + p.dc_lag);
        left.chain(died)
            .min()
            .filter(|&t| p.fencing_at(t).enabled && !self.successor_outside)
    }

    /// When the fence of n1 is confirmed, and whether it ended n1's processes (power).
    pub(super) fn fence_confirmed(&self) -> Option<(Duration, bool)> {
        let decided = self.fence_decided_at()?;
        let power = self.pacemaker.fencing_at(decided).ends_processes();
        Some((decided + self.pacemaker.fence_takes, power))
    }

    /// When a power fence ended everything of n1 (ground truth: it holds nothing after).
    pub(super) fn powered_off_at(&self) -> Option<Duration> {
        self.fence_confirmed().filter(|f| f.1).map(|f| f.0)
    }

    /// What Pacemaker on the successor shows of n1 at `t` (n1 `demoted` by an answered
    /// step-down): a witness that lags (dc_lag) and forgets (a dead controller's instance is
    /// shown stopped while the guard may still hold).
    pub(super) fn successor_sees(&self, t: Duration, demoted: bool) -> NodeSeen {
        if self.successor_outside {
            return NodeSeen::default();
        }
        let p = &self.pacemaker;
        let c = self.view(false, t);
        let member = c.members.contains(&1);
        let died = p.controller_dies.is_some_and(|d| t >= d + p.dc_lag);
        let fenced = self.fence_confirmed().is_some_and(|(at, _)| t >= at);
        NodeSeen {
            promoted: Some(!(demoted || died || fenced)),
            online: Some(member && !died && !fenced),
            down_clean: Some(!member && fenced && c.quorate && p.fencing_at(t).enabled),
        }
    }

    /// What n1's own Pacemaker says at `t`, as the order asked.
    pub(super) fn own_view(&self, t: Duration, fencing: bool, online: bool) -> OwnView {
        let p = &self.pacemaker;
        let alive = match p.controller_dies {
            Some(d) if t >= d => p.own_lag.map(|l| t < d + l),
            _ => Some(true),
        };
        OwnView {
            fencing: fencing.then(|| p.fencing_at(t)),
            online: if online { alive } else { None },
            rtc: Some(rtc_at(t)),
        }
    }

    /// Whether n1's corosync cannot answer at `t` (stopped, or n1 paused).
    pub(super) fn frozen(&self, t: Duration) -> bool {
        self.corosync_frozen
            .is_some_and(|c| c.at <= t && c.until.is_none_or(|(u, _, _)| t < u))
            || self.pause.is_some_and(|p| p.at <= t && t < p.end())
    }

    pub(super) fn quorum_lost(&self, t: Duration) -> bool {
        self.quorum_loss.is_some_and(|(f, u)| f <= t && t < u)
    }
}
