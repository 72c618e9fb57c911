//! The simulation's loop: a schedule set up, its events in true time, each one fed to the
//! machine or the world.

use super::*;

impl Sim {
    pub(super) fn new(seed: u64, rules: Rules) -> Sim {
        Sim::shaped(seed, rules, |_, _| {})
    }

    /// A schedule drawn from `seed`, then changed by `shape` before anything is scheduled.
    pub(super) fn shaped(
        seed: u64,
        rules: Rules,
        shape: impl Fn(&mut Schedule, &mut World),
    ) -> Sim {
        let mut rng = Rng(SplitMix64(seed));
        let mut s = Schedule::draw(&mut rng);
        // Drawn apart from the schedule's generator (the other draws stay as they were): one
        // command in four is a warm standby's.
        s.warm = !s.unit
            && SplitMix64(seed ^ 0x5741_524d_5354_4259)
                .next_u64()
                .is_multiple_of(4);
        // Half the warm ones have demote_command (its own generator too).
        let mut hook = SplitMix64(seed ^ 0x4445_4d4f_5445_2121);
        s.take_back = (s.warm && hook.next_u64().is_multiple_of(2)).then(|| {
            let ms =
                |hook: &mut SplitMix64, max: u64| Duration::from_millis(1 + hook.next_u64() % max);
            match hook.next_u64() % 4 {
                0 | 1 => TakeBackDraw::Confirms(ms(&mut hook, 3_000)),
                2 => TakeBackDraw::Fails(ms(&mut hook, 500)),
                _ => TakeBackDraw::Hangs,
            }
        });
        let slow = rng.chance(0.2);
        let world = World {
            node_rate: s.node_rate,
            rng: Some(Rng(SplitMix64(rng.next()))),
            effect_max: if slow {
                Duration::from_millis(5)
            } else {
                Duration::from_micros(200)
            },
            // An IPMI watchdog's ioctls talk to the BMC.
            ping_max: if slow {
                Duration::from_millis(20)
            } else {
                Duration::from_micros(200)
            },
            kernel_slack_ms: (rng.next() % 369) as i64 - 18,
            // Drawn apart from the schedule's generator: the other draws stay as they were.
            partial_faults: SplitMix64(seed ^ 0x5041_5254_4941_4c21)
                .next_u64()
                .is_multiple_of(7),
            remove_fault: Some(match rng.next() % 10 {
                0 => RemoveFault::Always,
                1 | 2 => RemoveFault::Once,
                _ => RemoveFault::Never,
            }),
            ignores_term: rng.chance(0.3),
            unkillable: rng.chance(0.03),
            term_exit: rng.ms(0, 800),
            dog_planned: rng.chance(0.7),
            dog_arm_fails: rng.chance(0.05),
            dog_step: match rng.next() % 20 {
                0 | 1 => 2,
                2 => 5,
                3 => 10,
                _ => 1,
            },
            dog_ping_fails: if rng.chance(0.05) { 1.0 } else { 0.0 },
            dog_disarm_fails: rng.chance(0.03),
            dog_late: 1.0 + WATCHDOG_TOLERANCE * (rng.next() % 1001) as f64 / 1000.0,
            ..World::default()
        };
        let (mut s, mut world) = (s, world);
        // Draws added after the mutation seeds were pinned: a generator of their own, so that
        // every other draw stays as it was.
        let mut late = Rng(SplitMix64(seed ^ 0x4c41_5445_4452_4157));
        s.loss_into_start = late.chance(0.2).then(|| match late.chance(0.5) {
            // Into the step's own effects (a fraction of a millisecond on a fast node).
            true => late.upto(Duration::from_millis(1)),
            false => late.ms(0, 20),
        });
        s.expiry_looked = late.chance(0.2).then(|| match late.chance(0.5) {
            true => Presence::Absent,
            false => Presence::CannotTell("the address dump failed (simulated)".into()),
        });
        if let Some(h) = s.hold.as_mut() {
            h.pause = Pause::draw(seed, h.membership_time);
        }
        shape(&mut s, &mut world);
        world.node_rate = s.node_rate;
        Sim::with(rng, s, world, rules)
    }

    pub(super) fn with(mut rng: Rng, mut s: Schedule, mut world: World, rules: Rules) -> Sim {
        let ttl = s.clock.ttl;
        if let Some(p) = s.hold.as_mut().and_then(|h| h.pause.as_mut()) {
            // Paused while it holds (the hold's case): cut off etcd from a lease before the
            // pause on, so that its lease's deadline has passed and its watch hears nothing.
            // A node paused while it leads on its lease serves on after the resume until its
            // deadline on its own (stopped) clock: the residual docs/safety.md states for a
            // paused VM, outside this rule.
            p.at = p.at.max(ttl + Duration::from_secs(5));
            s.faults
                .push((p.at - ttl - Duration::from_secs(2), HORIZON, Member::Silent));
            s.watch_works = false;
            world.paused = Some((p.at, p.end()));
        }
        // The grant: sent at 0, taken by etcd a little later.
        let granted_at_etcd = rng.ms(0, 20);
        let ttl = s.clock.ttl;
        let plan = Plan {
            clock: s.clock,
            vip: true,
            known: match (s.unit, s.warm) {
                (true, _) => Some(ServiceRef::Unit("api.service".to_string())),
                (false, true) => Some(ServiceRef::Group(4242)),
                (false, false) => None,
            },
            watchdog: match (world.dog_planned, world.dog_step) {
                (false, _) => WatchdogPlan::Off,
                // Coarse drivers: arming learns the steps, the pings ask what the driver is
                // known to round to; where no timeout fits, required fences, auto says so.
                (true, 2 | 10) => WatchdogPlan::Required,
                (true, _) => WatchdogPlan::Auto,
            },
            hold: s.hold.as_ref().map(|h| crate::guard::machine::HoldPlan {
                nodelist: (1..=h.nodes).collect(),
                power_fencing: h.pacemaker.auto,
                pacemaker: true,
            }),
            take_back: s.take_back.is_some(),
            campaign: false,
        };
        let mut m = Machine::new(plan, Duration::ZERO, ttl, world);
        m.mutant.rules = rules;
        let deadline = m.deadline();
        let view = m.view();
        let mut sim = Sim {
            rng,
            published: view.clone(),
            prior: view,
            published_at: Duration::ZERO,
            m,
            queue: BinaryHeap::new(),
            seq: 0,
            deadline,
            etcd_expiry: granted_at_etcd + ttl.div_f64(s.etcd_rate),
            key_ours: true,
            lease_alive: true,
            told_lost: None,
            frozen_until: None,
            killed: false,
            released: false,
            release_ordered_at: None,
            step_down_by: None,
            answered: None,
            exited: false,
            reset_at: None,
            fence_wake: None,
            watchdog_bound: ttl.div_f64(1.0 + MAX_SLEW),
            reached: Reached::default(),
            hold: s.hold.as_ref().map(|_| HoldWorld::default()),
            s,
        };
        if let Some(h) = &sim.s.hold {
            if let Some((from, _)) = h.quorum_loss {
                sim.at(from, Ev::QuorumLost);
            }
            let first = sim.rng.ms(0, 500);
            sim.at(first, Ev::SuccessorLooks);
        }
        // The grant's answer: the shell starts the machine then.
        let started = granted_at_etcd + sim.rng.ms(0, 20);
        sim.wake_at(started);
        for _ in 0..sim.rng.next() % 3 {
            let t = sim.rng.ms(0, 60_000);
            sim.at(t, Ev::EtcdLeaderChange);
        }
        if let Some((t, revoked)) = sim.s.ownership_lost {
            let watched_in = None;
            sim.at(
                t,
                Ev::OwnershipLost {
                    revoked,
                    watched_in,
                },
            );
        }
        if let Some((t, budget)) = sim.s.step_down {
            sim.at(t, Ev::StepDown { budget });
        }
        if let Some((t, _)) = sim.s.freeze {
            sim.at(t, Ev::Freeze);
        }
        sim
    }

    pub(super) fn at(&mut self, t: Duration, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, EvBox(ev))));
    }

    /// Arms the fencing thread's timer at `t` (true time), replacing the expiry it had.
    pub(super) fn wake_at(&mut self, t: Duration) {
        self.at(t, Ev::FenceWake);
        self.fence_wake = Some(self.seq);
    }

    /// True time now.
    pub(super) fn now(&self) -> Duration {
        self.m.kernel.now
    }

    /// This node's clock now.
    pub(super) fn node_now(&self) -> Duration {
        self.m.kernel.node_at(self.now())
    }

    /// How late past a bound the fencing thread may act: its wake-up latency, and the effects
    /// of a step it may be in the middle of.
    pub(super) fn late_by(&self) -> Duration {
        FENCE_LATENCY_BOUND + self.m.kernel.effect_max * 8 + self.m.kernel.ping_max * 8
    }

    pub(super) fn fail(&self, seed: u64, what: String) -> String {
        format!(
            "seed {seed}: {what}\nsetting ttl {:?} margin {:?} unit {} warm {}; clocks: node {:.4}, etcd \
             {:.4}; effects up to {:?} (pings {:?}); faults {:?}; stalls {:?}; freeze {:?}; \
             step-down {:?}; lost {:?}; remove {:?}; partial faults {}; looks that cannot tell \
             {}\nfailsafe: {:?}\n\
             trace:\n{}",
            self.s.clock.ttl,
            self.s.clock.margin,
            self.s.unit,
            self.s.warm,
            self.s.node_rate,
            self.s.etcd_rate,
            self.m.kernel.effect_max,
            self.m.kernel.ping_max,
            self.s.faults,
            self.s.stalls,
            self.s.freeze,
            self.s.step_down,
            self.s.ownership_lost,
            self.m.kernel.remove_fault,
            self.m.kernel.partial_faults,
            self.s.check_fails,
            self.s.hold,
            self.m.kernel.trace.join("\n")
        )
    }

    pub(super) fn frozen(&self) -> bool {
        self.stopped().is_some()
    }

    /// While the guard cannot act: until when (None: for good) — a SIGSTOP, or the whole node
    /// paused.
    pub(super) fn stopped(&self) -> Option<Option<Duration>> {
        let now = self.now();
        if let Some(p) = self.pause().filter(|p| p.at <= now && now < p.end()) {
            return Some(Some(p.end()));
        }
        match self.frozen_until {
            Some(Some(until)) if now >= until => None,
            other => other,
        }
    }

    /// n1's pause, if the schedule has one.
    pub(super) fn pause(&self) -> Option<Pause> {
        self.s.hold.as_ref().and_then(|h| h.pause)
    }

    pub(super) fn run(&mut self, seed: u64) -> Result<(), String> {
        let mut steps = 0u32;
        while let Some(Reverse((t, seq, EvBox(ev)))) = self.queue.pop() {
            // The fencing thread's timerfd holds one expiry: a wake-up that a later arming
            // replaced never fires.
            if ev == Ev::FenceWake && self.fence_wake != Some(seq) {
                continue;
            }
            steps += 1;
            if t > HORIZON {
                break;
            }
            if steps > 300_000 {
                // A machine that asks to be woken again and again without progress spins the
                // real fencing thread (at real-time priority): a failure, not an end.
                return Err(self.fail(seed, format!("no progress: 300000 steps by {t:?}")));
            }
            // The guard's threads act once they are free (an effect's time may have carried
            // the world past `t`); the world's own events happen at their time.
            let at = t.max(self.now());
            self.check(at, seed)?;
            self.m.kernel.now = at;
            self.m.kernel.expire();
            if let Some(stopped) = self.stopped().filter(|_| ev.guard_side()) {
                if let Some(until) = stopped {
                    // Stopped: it waits for SIGCONT or the resume (a timerfd fires at once then).
                    if ev == Ev::FenceWake {
                        self.wake_at(until);
                    } else {
                        self.at(until, ev);
                    }
                }
                continue;
            }
            if ev.on_async_side() {
                let free = self.s.async_free_at(at);
                if free > at {
                    self.at(free, ev);
                    continue;
                }
            }
            let expiries = self.m.kernel.expiries;
            self.step(ev, t, seed)?;
            for (t, ev) in std::mem::take(&mut self.m.kernel.scheduled) {
                self.at(t, ev);
            }
            self.watch_sees_expiry(expiries);
        }
        Ok(())
    }

    /// The wire watch (while leading) sees the kernel's deletion of an expired VIP as an
    /// address event and tells the machine, a few milliseconds later; where the event was
    /// dropped, its look at the address says so only when it proves the absence.
    pub(super) fn watch_sees_expiry(&mut self, before: u32) {
        let leading = self.m.phase().is_leading();
        if self.m.kernel.expiries > before && leading && !self.frozen() {
            let d = self.rng.ms(1, 20);
            let (ip, nic) = (std::net::Ipv4Addr::new(192, 0, 2, 10).into(), "lan0");
            let up = answers::LinkSeen::Up;
            let told = match &self.s.expiry_looked {
                None => Some(answers::address_deleted(ip, nic, Some(up))),
                Some(present) => answers::looked(ip, nic, up, present),
            };
            if let Some(input) = told {
                self.deliver(d, input);
            }
        }
    }

    /// The machine takes one input; its orders are performed, its next wake-up armed.
    pub(super) fn feed(&mut self, input: Input, seed: u64) -> Result<(), String> {
        if self.exited {
            return Ok(());
        }
        let now = self.now();
        // While holding, a deleted key or a lease etcd let go is no loss yet (the key is taken
        // back); another lease on the key always is.
        let holding = self.m.phase() == crate::guard::machine::Phase::Holding;
        let lost = match &input {
            Input::KeyLost(Some(_)) => true,
            Input::KeyLost(None) | Input::LeaseGone { .. } => !holding,
            Input::Renewed { ttl, .. } => ttl.is_zero() && !holding,
            _ => false,
        };
        if lost {
            self.told_lost.get_or_insert(now);
        }
        let raised_before = self.m.kernel.raised.len();
        let pinged_before = self.m.kernel.pings.len();
        let node_now = self.node_now();
        // The fencing thread's own step: what it gives out, in its order.
        let mut outs = Vec::new();
        crate::guard::fence::step(&mut self.m, node_now, input, |o| outs.push(o));
        if let Some(h) = &mut self.hold {
            h.held |= self.m.phase() == crate::guard::machine::Phase::Holding;
        }
        self.check_raises(raised_before, seed)?;
        self.check_watchdog(pinged_before, seed)?;
        for out in outs {
            match out {
                Out::View(view) => {
                    self.prior = std::mem::replace(&mut self.published, *view);
                    self.published_at = self.now();
                }
                Out::Order(order) => self.perform(order, seed)?,
            }
        }
        match self.m.next_wake() {
            Some(w) => {
                let t = self.m.kernel.true_at(w).max(self.now()) + self.s.fence_latency;
                self.wake_at(t);
            }
            // Disarmed (timerfd_settime with zero).
            None => self.fence_wake = None,
        }
        Ok(())
    }

    /// One event: `t` is its own time (the world's events and etcd act on it); the guard's
    /// side acts at `self.now()`.
    pub(super) fn step(&mut self, ev: Ev, t: Duration, seed: u64) -> Result<(), String> {
        let now = self.now();
        let etcd_side = matches!(
            ev,
            Ev::EtcdRenews { .. }
                | Ev::EtcdLeaderChange
                | Ev::OwnershipLost { .. }
                | Ev::QuorumLost
                | Ev::SuccessorLooks
        );
        if self.reset_at.is_some() && !etcd_side {
            // The node was reset: nothing on it happens any more; etcd goes on.
            return Ok(());
        }
        match ev {
            Ev::FenceWake => self.feed(Input::Tick, seed)?,
            Ev::Deliver(input) => {
                if matches!(input, Input::KeyLost(_))
                    && self.release_ordered_at.is_some()
                    && !self.exited
                {
                    self.reached.own_deletions_heard += 1;
                }
                if let Input::ServiceStarted(Ok(ServiceRef::Unit(_))) = &input {
                    let w = &mut self.m.kernel;
                    if !w.service && w.termed_at.is_some() && self.rng.chance(0.5) {
                        // The start job waited (on its dependencies) and ran after the stop.
                        w.service = true;
                        w.note("the unit's start job ran after the stop".into());
                    }
                }
                if let Input::Membership { asked, seen, .. } = &input {
                    let holding = self.node_now() >= self.deadline;
                    let whole = seen.as_ref().map(|c| c.quorate && c.missing().is_empty());
                    if let Some(h) = &mut self.hold {
                        if h.answered.is_none_or(|a| *asked > a) {
                            h.answered = Some(*asked);
                            match whole {
                                Ok(true) => {
                                    let d = *asked + PROOF_LIFE;
                                    h.proof_deadline = Some(h.proof_deadline.unwrap_or(d).max(d));
                                }
                                Ok(false) => {
                                    // The hold ends now (a proof's deadline until then).
                                    let node_now = self.m.kernel.node_at(now);
                                    h.proof_deadline = h.proof_deadline.map(|d| d.min(node_now));
                                    if holding {
                                        self.told_lost.get_or_insert(now);
                                    }
                                }
                                Err(_) => {}
                            }
                        }
                    }
                }
                if let Input::Retaken(Ok(Regrant { sent, ttl })) = &input {
                    self.deadline = self.deadline.max(*sent + *ttl - self.s.clock.margin);
                    let sent_true = self.m.kernel.true_at(*sent);
                    self.watchdog_bound = self
                        .watchdog_bound
                        .max(sent_true + ttl.div_f64(1.0 + MAX_SLEW));
                }
                if let Input::Renewed { sent, ttl } = &input {
                    if !ttl.is_zero() {
                        let node_now = self.node_now();
                        self.reached.late_answers += u32::from(node_now >= self.deadline);
                        if node_now < self.ground_deadline() {
                            self.deadline = self.deadline.max(*sent + *ttl - self.s.clock.margin);
                            let sent_true = self.m.kernel.true_at(*sent);
                            self.watchdog_bound = self
                                .watchdog_bound
                                .max(sent_true + ttl.div_f64(1.0 + MAX_SLEW));
                        }
                    }
                }
                self.feed(input, seed)?;
            }
            Ev::EtcdRenews {
                sent,
                sent_true,
                reply_in,
            } => {
                let timeout = self
                    .s
                    .clock
                    .renewal_attempt_timeout()
                    .div_f64(self.s.node_rate);
                let result = if !self.lease_alive || t >= self.etcd_expiry || self.released {
                    // A fresh stream says the lease does not exist; an open one answers TTL 0.
                    if self.rng.chance(0.5) {
                        Err(RenewError::LeaseNotFound("m1 (simulated)".into()))
                    } else {
                        Ok(Duration::ZERO)
                    }
                } else {
                    // etcd counts the TTL on its own clock.
                    let ttl = self.s.clock.ttl;
                    self.etcd_expiry = self.etcd_expiry.max(t + ttl.div_f64(self.s.etcd_rate));
                    Ok(ttl)
                };
                if t + reply_in <= sent_true + timeout {
                    let answer = answers::renewal(LEASE, sent, &result);
                    self.at(t + reply_in, Ev::Deliver(answer));
                }
            }
            Ev::EtcdLeaderChange => {
                if t < self.etcd_expiry && self.lease_alive && !self.released {
                    // A new etcd leader extends every live lease by a full TTL (its clock).
                    let ttl = self.s.clock.ttl.div_f64(self.s.etcd_rate);
                    self.etcd_expiry = self.etcd_expiry.max(t + ttl);
                }
            }
            Ev::OwnershipLost {
                revoked,
                watched_in,
            } => {
                self.key_ours = false;
                if revoked {
                    self.lease_alive = false;
                }
                let raising = self.m.phase().is_raising();
                self.reached.lost_while_raising |= raising;
                // Another node may take the key from now on: the VIP must go as soon as the
                // guard hears of it (the watch, or the next renewal's answer or confirm).
                self.m.kernel.note(
                    if revoked {
                        "lease revoked behind the guard's back"
                    } else {
                        "key deleted behind the guard's back"
                    }
                    .into(),
                );
                if self.s.watch_works || watched_in.is_some() {
                    let d = watched_in.unwrap_or_else(|| self.rng.ms(1, 200));
                    let event = crate::lease::etcd::KeyEvent::Deleted;
                    if let Some(input) = answers::watched(LEASE, &event) {
                        self.at(now + d, Ev::Deliver(input));
                    }
                }
            }
            Ev::KernelExpiry => self.m.kernel.expire(),
            Ev::QuorumLost => {
                // No leader: no lease expires; the next leader extends every live lease.
                let to = self
                    .s
                    .hold
                    .as_ref()
                    .and_then(|h| h.quorum_loss)
                    .map(|q| q.1);
                if let Some(to) = to {
                    if t < self.etcd_expiry && self.lease_alive && !self.released {
                        let ttl = self.s.clock.ttl.div_f64(self.s.etcd_rate);
                        self.etcd_expiry = self.etcd_expiry.max(to + ttl);
                    }
                    self.m.kernel.note("etcd lost its quorum".into());
                }
            }
            Ev::SuccessorLooks => self.successor_looks(t),
            Ev::GaveBack => {
                let w = &mut self.m.kernel;
                if w.service {
                    w.service = false;
                    w.note("the service gave the role back".into());
                }
                // The hook's exit reaches the machine a little later: after its budget's end,
                // sometimes, when it confirmed just before.
                let d = self.rng.ms(0, 60);
                self.deliver(d, answers::taken_back(Ok(())));
            }
            Ev::ServiceDies => {
                let w = &mut self.m.kernel;
                if w.service {
                    w.service = false;
                    w.note("service exited".into());
                    if !self.s.unit {
                        self.at(
                            now,
                            Ev::Deliver(answers::service_exited("exited (simulated)".into())),
                        );
                    }
                }
            }
            Ev::Spawn => {
                // The shell's start task asks right before its fork, on its own thread, at `t`:
                // the fencing thread may be in the middle of a step then (its effects take
                // time), so the task reads the view as last published before `t` and the
                // host's standing as of `t` (Fence::wants_service).
                let stale = t < self.published_at;
                let view = match stale {
                    true => &self.prior,
                    false => &self.published,
                };
                let w = &self.m.kernel;
                let standing = w.no_standing || w.lowered_at.is_none_or(|l| t < l);
                let view_wants = view.wants_service(w.node_at(t));
                let wanted = standing && view_wants;
                self.reached.stale_views += u32::from(stale);
                self.reached.standing_refused += u32::from(view_wants && !standing);
                let input = if !wanted {
                    answers::started(Err("not started: the raise was abandoned".into()))
                } else if self.s.start_fails {
                    answers::started(Err("spawn failed (simulated)".into()))
                } else {
                    if self.told_lost.is_some_and(|l| l <= t) || w.node_at(t) >= self.deadline {
                        return Err(self.fail(
                            seed,
                            format!("service forked at {t:?}, after the loss told or the deadline"),
                        ));
                    }
                    self.m.kernel.service = true;
                    self.m.kernel.starts += 1;
                    self.m.kernel.note("service starting".into());
                    answers::started(Ok(ServiceRef::Group(4242)))
                };
                self.feed(input, seed)?;
            }
            Ev::StepDown { budget } => {
                let asked = answers::step_down(self.node_now(), Some(budget));
                if let Input::StepDown { by } = asked {
                    self.step_down_by = Some(by);
                }
                self.m
                    .kernel
                    .note(format!("step-down asked, budget {budget:?}"));
                self.feed(asked, seed)?;
            }
            Ev::Freeze => {
                let Some((_, dur)) = self.s.freeze else {
                    return Ok(());
                };
                self.frozen_until = Some(dur.map(|d| now + d));
                self.reached.froze = true;
                match dur {
                    None => {
                        self.killed = true;
                        // PR_SET_PDEATHSIG: a killed guard's command dies with it.
                        if !self.s.unit {
                            self.m.kernel.service = false;
                        }
                        self.m.kernel.note("guard SIGKILLed".into());
                    }
                    Some(d) => {
                        self.m.kernel.note("guard SIGSTOPped".into());
                        self.at(now + d, Ev::Unfreeze);
                    }
                }
            }
            Ev::Unfreeze => {
                if self.reset_at.is_none() {
                    self.m.kernel.note("guard resumed".into());
                    self.wake_at(now);
                }
            }
            Ev::WatchdogFires => {
                let Some((_, fires)) = self.m.kernel.dog else {
                    return Ok(());
                };
                if fires > t || self.reset_at.is_some() {
                    return Ok(());
                }
                // A guard stopped past its fencing time is not on time, even at the very
                // instant it resumes (before it ran).
                let fence_at = self.m.kernel.true_at(self.m.fence_at());
                let stopped_past_fence =
                    matches!(self.frozen_until, Some(Some(until)) if until >= fence_at);
                let on_time = !self.frozen()
                    && !stopped_past_fence
                    && !self.killed
                    && self.m.fenced().is_none()
                    && !self.harmless_close_failure();
                if on_time {
                    return Err(self.fail(
                        seed,
                        format!("the watchdog reset the node at {t:?}, its guard on time"),
                    ));
                }
                // The node resets: everything on it stops, the guard never acts again.
                let w = &mut self.m.kernel;
                w.vip = false;
                w.service = false;
                w.note("the watchdog reset the node".into());
                self.reset_at = Some(t);
                self.killed = true;
                self.frozen_until = Some(None);
            }
        }
        Ok(())
    }
}
