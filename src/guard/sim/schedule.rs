//! What each schedule draws from its seed: the lease setting, faults on every input and
//! effect, Pacemaker's view, corosync's cuts and a pause.

use super::*;

impl Pause {
    pub(super) fn end(&self) -> Duration {
        self.at + self.length
    }

    /// The membership change it makes, as the views see it.
    pub(super) fn cut(&self) -> Cut {
        let merged = self.end() + self.stale + self.merge;
        Cut {
            at: self.at,
            seen_a: self.length + self.stale,
            seen_b: self.seen_b,
            until: Some((merged, Duration::ZERO, Duration::ZERO)),
        }
    }

    /// A pause of n1 in one schedule of eight with a failsafe (its own generator: the other
    /// draws stay as they were).
    pub(super) fn draw(seed: u64, membership_time: Duration) -> Option<Pause> {
        let mut g = SplitMix64(seed ^ 0x5041_5553_4521_2121);
        let mut ms = |lo: u64, hi: u64| Duration::from_millis(lo + g.next_u64() % (hi - lo + 1));
        let m = membership_time.as_millis() as u64;
        (ms(0, 7) == Duration::ZERO).then(|| Pause {
            at: ms(5_000, 50_000),
            length: ms(1_000, 40_000),
            stale: ms(0, m),
            seen_b: ms(0, m),
            merge: ms(0, m),
        })
    }
}

/// n1's RTC at true time `t`: the host's clock, which a pause does not stop (whole seconds).
pub(super) fn rtc_at(t: Duration) -> u64 {
    1_000_000 + t.as_secs()
}

impl PacemakerSchedule {
    pub(super) fn draw(rng: &mut Rng) -> PacemakerSchedule {
        let power = Fencing {
            enabled: true,
            fabric: vec![],
        };
        let fabric = Fencing {
            enabled: true,
            fabric: vec!["scsi".into()],
        };
        let auto = rng.chance(0.6);
        let fencing = match (auto, rng.next() % 4) {
            (true, _) | (false, 0 | 1) => power,
            (false, 2) => fabric.clone(),
            (false, _) => Fencing::default(),
        };
        PacemakerSchedule {
            auto,
            fencing,
            change: rng.chance(0.15).then(|| {
                let to = if rng.chance(0.5) {
                    Fencing::default()
                } else {
                    fabric
                };
                (rng.ms(0, 60_000), to)
            }),
            controller_dies: rng.chance(0.2).then(|| rng.ms(0, 60_000)),
            dc_lag: rng.ms(0, 2_000),
            own_lag: (!rng.chance(0.3)).then(|| rng.ms(0, 3_000)),
            fence_takes: rng.ms(50, 5_000),
        }
    }

    /// How the cluster fences at `t`.
    pub(super) fn fencing_at(&self, t: Duration) -> Fencing {
        match &self.change {
            Some((at, to)) if t >= *at => to.clone(),
            _ => self.fencing.clone(),
        }
    }
}

impl Cut {
    /// Whether the change is in n1's view (`a`) or the successor's at `t`.
    pub(super) fn in_view(&self, a: bool, t: Duration) -> bool {
        let seen = if a { self.seen_a } else { self.seen_b };
        let from = self.at + seen;
        let until = self
            .until
            .map_or(Duration::MAX, |(u, ea, eb)| u + if a { ea } else { eb });
        from <= t && t < until
    }

    /// The moments at which either view changes (for ring ids).
    pub(super) fn changes(&self) -> Vec<Duration> {
        let mut v = vec![self.at + self.seen_a, self.at + self.seen_b];
        if let Some((u, ea, eb)) = self.until {
            v.extend([u + ea, u + eb]);
        }
        v
    }

    /// Each side sees a change within `skew` of it, on its own (two partitions form their
    /// own rings); its end is one ring both join (a merge), seen by both within a token's
    /// rotation of each other.
    pub(super) fn draw(
        rng: &mut Rng,
        at: Duration,
        skew: Duration,
        lasts: Option<Duration>,
    ) -> Cut {
        let (seen_a, seen_b) = (rng.upto(skew), rng.upto(skew));
        let until = lasts.map(|l| {
            let merged = rng.upto(skew);
            let (ea, eb) = (merged + rng.ms(0, 50), merged + rng.ms(0, 50));
            (at + l, ea, eb)
        });
        Cut {
            at,
            seen_a,
            seen_b,
            until,
        }
    }
}

/// A clock's rate against true time: nominal, at the slew's extreme that hurts (`worst`), or
/// anywhere within it.
pub(super) fn rate(rng: &mut Rng, worst: f64) -> f64 {
    match rng.next() % 10 {
        0..=3 => 1.0,
        4..=6 => worst,
        _ => rng.between(1.0 - MAX_SLEW, 1.0 + MAX_SLEW),
    }
}

impl Schedule {
    pub(super) fn draw(rng: &mut Rng) -> Schedule {
        let clock = match rng.next() % 4 {
            0 | 1 => DEFAULTS,
            2 => LeaseClock {
                ttl: Duration::from_secs(3),
                margin: Duration::from_secs(1),
            },
            _ => {
                // Any valid setting: T ≥ 2, 1 ≤ M < 2T/3.
                let ttl = 2 + rng.next() % 29;
                let max_margin = (2 * ttl).div_ceil(3) - 1;
                let margin = 1 + rng.next() % max_margin.max(1);
                LeaseClock {
                    ttl: Duration::from_secs(ttl),
                    margin: Duration::from_secs(margin),
                }
            }
        };
        let mut faults = Vec::new();
        for _ in 0..rng.next() % 5 {
            let from = rng.ms(0, 60_000);
            let to = from + rng.ms(50, 25_000);
            let kind = match rng.next() % 4 {
                0 => Member::Slow,
                1 => Member::Silent,
                2 => Member::Refusing,
                _ => Member::Normal,
            };
            faults.push((from, to, kind));
        }
        let mut stalls = Vec::new();
        for _ in 0..rng.next() % 4 {
            let from = rng.ms(0, 60_000);
            let long = rng.chance(0.3);
            let len = if long {
                rng.ms(1_000, 30_000)
            } else {
                rng.ms(1, 500)
            };
            stalls.push((from, from + len));
        }
        let unit = rng.chance(0.3);
        Schedule {
            clock,
            unit,
            warm: false,
            take_back: None,
            node_rate: rate(rng, 1.0 - MAX_SLEW),
            etcd_rate: rate(rng, 1.0 + MAX_SLEW),
            fence_latency: if rng.chance(0.9) {
                rng.ms(0, 2)
            } else {
                rng.ms(0, FENCE_LATENCY_BOUND.as_millis() as u64)
            },
            faults,
            stalls,
            freeze: rng.chance(0.1).then(|| {
                (
                    rng.ms(0, 40_000),
                    (!rng.chance(0.4)).then(|| rng.ms(100, 40_000)),
                )
            }),
            // DAD up to 10 s, or a long foreground announcement burst.
            settle_takes: if rng.chance(0.7) {
                rng.ms(0, 50)
            } else {
                rng.ms(0, 10_000)
            },
            settle_fails: rng.chance(0.03),
            // `systemctl start` up to 90 s.
            start_takes: if rng.chance(0.7) {
                rng.ms(0, 50)
            } else if unit {
                rng.ms(0, 90_000)
            } else {
                rng.ms(0, 200)
            },
            start_fails: rng.chance(0.03),
            watch_works: rng.chance(0.7),
            check_fails: match rng.next() % 10 {
                0 | 1 => 0.3,
                2 => 0.9,
                _ => 0.0,
            },
            release_fails: if rng.chance(0.2) { 0.5 } else { 0.0 },
            step_down: rng
                .chance(0.35)
                .then(|| (rng.ms(0, 60_000), rng.ms(3_000, 40_000))),
            ownership_lost: rng
                .chance(0.3)
                .then(|| (rng.ms(0, 40_000), rng.chance(0.5))),
            loss_into_start: None,
            expiry_looked: None,
            hold: None,
        }
        .with_hold(rng)
    }

    /// Half the schedules: the failsafe world, whose etcd outages (a quorum loss, n1 cut off)
    /// are also faults on n1's keepalives (Schedule::member).
    pub(super) fn with_hold(mut self, rng: &mut Rng) -> Schedule {
        if rng.chance(0.5) {
            self.hold = Some(HoldSchedule::draw(rng));
        }
        self
    }

    pub(super) fn member(&self, at: Duration) -> Member {
        if let Some(h) = &self.hold {
            if h.quorum_lost(at) {
                return h.quorum_answer;
            }
            // Cut off from the others is cut off from etcd's majority too.
            if h.partition
                .is_some_and(|c| c.at <= at && c.until.is_none_or(|(u, _, _)| at < u))
            {
                return Member::Silent;
            }
        }
        self.faults
            .iter()
            .rev()
            .find(|(from, to, _)| *from <= at && at < *to)
            .map_or(Member::Normal, |f| f.2)
    }

    /// When the async side can next act at or after `t`.
    pub(super) fn async_free_at(&self, mut t: Duration) -> Duration {
        for _ in 0..16 {
            match self.stalls.iter().find(|(a, b)| *a <= t && t < *b) {
                Some((_, b)) => t = *b,
                None => break,
            }
        }
        t
    }
}
