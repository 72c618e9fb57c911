//! The simulated shell: the machine's orders performed as guard::lead performs them, through
//! the same answers (guard::answers), and the successor's looks at the failsafe record.

use super::*;

impl Sim {
    pub(super) fn deliver(&mut self, after: Duration, input: Input) {
        let t = self.now() + after;
        self.at(t, Ev::Deliver(input));
    }

    pub(super) fn perform(&mut self, order: Order, seed: u64) -> Result<(), String> {
        let now = self.now();
        match order {
            Order::Keepalive { sent } => self.keepalive(sent),
            Order::Confirm => {
                if self.s.member(now) == Member::Normal {
                    let ours = Ok(self.key_ours);
                    if let Some(input) = answers::confirm(&ours, None) {
                        let d = self.rng.ms(1, 20);
                        self.deliver(d, input);
                    }
                }
            }
            Order::Settle { dad_wait } => {
                let takes = self.s.settle_takes.min(dad_wait);
                let r = match self.s.settle_fails {
                    true => Err(crate::vip::VipError::DadFailed {
                        ip: std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10).into(),
                        nic: "lan0".into(),
                    }),
                    false => Ok(()),
                };
                self.deliver(takes, answers::settled(&r));
            }
            Order::CancelAnnouncements => {}
            Order::WriteToken => self.deliver(Duration::ZERO, answers::token_written(Ok(()))),
            Order::StartService => {
                self.m.kernel.check_armed_for_raise("service start ordered");
                if self.told_lost.is_some() || self.node_now() >= self.deadline {
                    return Err(self.fail(
                        seed,
                        format!("service started at {now:?}, after the loss told or the deadline"),
                    ));
                }
                let takes = self.s.start_takes;
                if self.s.unit || self.s.warm {
                    // A unit may run from the moment its start is asked, even when the start
                    // fails, and a warm standby may act on the role from the moment its
                    // hand-over is asked, even when the hand-over fails; the machine knows
                    // either from before.
                    self.m.kernel.service = true;
                    self.m.kernel.starts += 1;
                    self.m.kernel.note("service starting".into());
                    let r = match (self.s.start_fails, self.s.unit) {
                        (true, _) => Err("start failed (simulated)".to_string()),
                        (false, true) => Ok(ServiceRef::Unit("api.service".into())),
                        (false, false) => Ok(ServiceRef::Group(4242)),
                    };
                    self.deliver(takes, answers::started(r));
                } else {
                    // A command is forked by the shell's task, which tells the machine its pid
                    // in the same breath (see Ev::Spawn).
                    let t = now + takes;
                    self.at(t, Ev::Spawn);
                    // A schedule with a loss of ownership (kept or cleared by a shaped test).
                    if let (Some(before), Some(_)) = (self.s.loss_into_start, self.s.ownership_lost)
                    {
                        let (revoked, watched_in) = (false, Some(Duration::ZERO));
                        let lost = Ev::OwnershipLost {
                            revoked,
                            watched_in,
                        };
                        self.at(t.saturating_sub(before).max(now), lost);
                    }
                }
            }
            Order::TakeBack { within } => {
                self.m.kernel.take_back_at.get_or_insert(now);
                // Killed at its budget's end by the shell, which then says so.
                let killed = || answers::taken_back(Err("killed (simulated)".into()));
                match self.s.take_back {
                    Some(TakeBackDraw::Confirms(d)) if d < within => self.at(now + d, Ev::GaveBack),
                    Some(TakeBackDraw::Fails(d)) if d < within => {
                        let failed = answers::taken_back(Err("exit status 1 (simulated)".into()));
                        self.deliver(d, failed);
                    }
                    Some(_) => self.deliver(within, killed()),
                    None => {
                        return Err(self.fail(seed, "a take-back without demote_command".into()))
                    }
                }
            }
            Order::CheckService(_) => {
                let look = self.look_at_service();
                self.deliver(CHECK_TAKES, answers::service_checked(look));
            }
            Order::Release => {
                self.release_ordered_at.get_or_insert(now);
                let w = &self.m.kernel;
                if w.vip || w.service {
                    return Err(self.fail(
                        seed,
                        format!(
                            "release at {now:?} with the VIP ({}) or the service ({}) up",
                            w.vip, w.service
                        ),
                    ));
                }
                let limit = self.s.clock.release_timeout();
                if self.rng.chance(self.s.release_fails) || self.s.member(now) != Member::Normal {
                    let d = self.rng.ms(1, 2_000);
                    let r = (d < limit).then(|| {
                        Err(LeaseError::Etcd {
                            op: "release transaction",
                            detail: "etcd unreachable (simulated)".into(),
                        })
                    });
                    self.deliver(d.min(limit), answers::released(r, limit));
                } else {
                    self.released = true;
                    self.etcd_expiry = self.etcd_expiry.min(now);
                    self.m.kernel.note("key released, lease revoked".into());
                    // The answer may be slow to come back (a slow member).
                    let d = if self.rng.chance(0.1) {
                        self.rng.ms(1, 5_000)
                    } else {
                        Duration::from_millis(2)
                    };
                    let r = (d < limit).then_some(Ok(true));
                    self.deliver(d.min(limit), answers::released(r, limit));
                    // The watch sees the guard's own deletion, before or after the answer.
                    if self.s.watch_works {
                        let seen = if self.rng.chance(0.5) {
                            self.rng.ms(0, d.as_millis() as u64)
                        } else {
                            d + self.rng.ms(1, 200)
                        };
                        let event = crate::lease::etcd::KeyEvent::Deleted;
                        if let Some(input) = answers::watched(LEASE, &event) {
                            self.deliver(seen, input);
                        }
                    }
                }
            }
            Order::Persist => {
                // The shell writes state.json from the view as published: it must never say
                // the VIP is down while the kernel has it (a dead guard's clean-up trusts it).
                if self.m.kernel.vip && !self.published.vip.may_be_up() {
                    return Err(self.fail(
                        seed,
                        format!(
                            "state.json written at {now:?} with the VIP down ({:?}) while the \
                             kernel has it",
                            self.published.vip
                        ),
                    ));
                }
            }
            Order::Log(_, text) => self.m.kernel.note(format!("guard: {text}")),
            Order::StepDownAnswer(r) => {
                if self.answered.is_none() {
                    self.answered = Some((self.now(), r.is_ok()));
                }
                if let (Some(h), true) = (&mut self.hold, r.is_ok()) {
                    // Pacemaker records the demote done: the CIB shows n1 demoted.
                    h.demoted = true;
                }
                if r.is_ok() && (self.m.kernel.vip || self.m.kernel.service) {
                    return Err(self.fail(seed, "step-down answered done with things up".into()));
                }
            }
            Order::Exit { .. } => self.exited = true,
            // Pacemaker and the wire are outside the simulated world.
            Order::Push { .. } | Order::Defend { .. } => {}
            // The clients are told only of a VIP the machine raised, before the lease can
            // have ended at etcd (a deletion it has not heard of yet it cannot know; the rounds
            // themselves ask the published view, as the shell's do).
            Order::Repoint => {
                let vip = self.m.vip();
                if vip != crate::guard::machine::VipState::Up || now >= self.etcd_expiry {
                    return Err(self.fail(
                        seed,
                        format!(
                            "clients told at {now:?} with the VIP {vip:?}, the lease ending at \
                             etcd at {:?}",
                            self.etcd_expiry
                        ),
                    ));
                }
            }
            Order::AskMembership {
                asked,
                fencing,
                online,
            } => self.ask_corosync(asked, fencing, online),
            Order::Retake => self.retake(),
        }
        Ok(())
    }

    /// The shell's ask of n1's corosync (failsafe::witness::ask): what it shows when it
    /// processes the ask, or no answer within ASK_LIMIT (stopped, or slow).
    pub(super) fn ask_corosync(&mut self, asked: Duration, fencing: bool, online: bool) {
        let Some(h) = self.s.hold.clone() else {
            return;
        };
        let now = self.now();
        let took = self.rng.upto(h.answer_max);
        let limit = ASK_LIMIT.div_f64(self.s.node_rate);
        let seen_at = now + took / 2;
        // Pacemaker's tools answer from its local CIB, stopped corosync or not; the RTC is
        // read as the ask begins (the shell reads it first), and goes with whatever the ask
        // brings back.
        let rtc = Some(rtc_at(now));
        let pacemaker = (took < limit).then(|| h.own_view(seen_at, fencing, online));
        let (after, seen) = if took >= limit || h.frozen(seen_at) {
            (
                limit,
                Err("corosync did not answer in time (simulated)".to_string()),
            )
        } else {
            (took, Ok(h.view(true, seen_at)))
        };
        let said = match &seen {
            Ok(c) => c.describe(),
            Err(e) => e.clone(),
        };
        self.m
            .kernel
            .note(format!("corosync asked ({asked:?} on n1's clock): {said}"));
        self.deliver(after, answers::membership(asked, rtc, seen, pacemaker));
    }

    /// The shell's retake after a hold: a new lease, and the key under it only while it is
    /// absent and the failsafe record is still ours (the successor rewrites it when it takes).
    pub(super) fn retake(&mut self) {
        let now = self.now();
        let quorum = self.s.hold.as_ref().is_some_and(|h| h.quorum_lost(now));
        let d = self.rng.ms(1, 20);
        let result = if self.s.member(now) != Member::Normal || quorum {
            let d = self.s.clock.etcd_op_timeout().div_f64(self.s.node_rate);
            self.deliver(
                d,
                answers::retaken(Err(RetakeError::Failed(
                    "etcd unreachable (simulated)".into(),
                ))),
            );
            return;
        } else if self.hold.as_ref().is_some_and(|h| h.successor_at.is_some()) {
            Err(RetakeError::Taken(Some(99)))
        } else if self.key_present(now) {
            Err(RetakeError::Taken(Some(LEASE.0)))
        } else {
            let ttl = self.s.clock.ttl;
            self.etcd_expiry = now + d + ttl.div_f64(self.s.etcd_rate);
            self.lease_alive = true;
            self.key_ours = true;
            self.released = false;
            self.m.kernel.note("key taken back with a new lease".into());
            if let Some(h) = &mut self.hold {
                h.retaken = true;
            }
            Ok(Regrant {
                sent: self.node_now(),
                ttl,
            })
        };
        self.deliver(d * 2, answers::retaken(result));
    }

    /// Whether the leader key exists at etcd now (under our lease).
    pub(super) fn key_present(&self, t: Duration) -> bool {
        self.key_ours && self.lease_alive && !self.released && t < self.etcd_expiry
    }

    /// The successor's look (every ASK_EVERY on its clock): its corosync, the real takeover
    /// rule on the failsafe record naming n1, and the key; it takes the key and raises the
    /// moment the rule clears it and the key is free (at its own etcd, in quorum).
    pub(super) fn successor_looks(&mut self, t: Duration) {
        let Some(h) = self.s.hold.clone() else {
            return;
        };
        // Free by the lease's end or the guard's own release: an operator's deletion behind
        // the guard's back (OwnershipLost) is outside the guarantee, as without a record.
        let key_free = self.released || t >= self.etcd_expiry;
        let rules = self.m.mutant.rules;
        let Some(hw) = &mut self.hold else {
            return;
        };
        if hw.successor_at.is_some() {
            return;
        }
        let b_now = t.mul_f64(h.successor_rate);
        let c = h.successor_view(t);
        let record = Record {
            node: "n1".into(),
            lease: LEASE.to_string(),
            nodes: vec![],
            written_unix_ms: 0,
            home: Some(Home::of(&h.view(true, Duration::ZERO))),
        };
        let since = match clearance::whereabouts(&record, &c, &rules) {
            Ok(member) => hw.outside.look(&c, member, b_now),
            Err(_) => None,
        };
        let fencing = h.pacemaker.fencing_at(t);
        let facts = Facts {
            me: if h.successor_outside { "dr1" } else { "n2" },
            record: Some(&record),
            cluster: Ok(&c),
            holder: h.successor_sees(t, hw.demoted),
            // Outside, its Pacemaker (if any) is another cluster's: its fencing says nothing.
            fencing: (!h.successor_outside).then_some(&fencing),
            outside_since: since,
            now: b_now,
            membership_time: h.membership_time,
            confirmed_down: None,
        };
        let verdict = clearance::clearance(&facts, &rules);
        hw.blocked |= matches!(verdict, Clearance::Blocked(_));
        if matches!(verdict, Clearance::Clear(_)) && key_free && !h.quorum_lost(t) {
            hw.successor_at = Some(t);
            self.m.kernel.note(format!(
                "the successor takes the key and raises ({verdict:?})"
            ));
            // The watch sees the successor's put under its own lease.
            let put = crate::lease::etcd::KeyEvent::Put { lease: LeaseId(99) };
            if let (true, Some(input)) = (self.s.watch_works, answers::watched(LEASE, &put)) {
                let d = self.rng.ms(1, 200);
                self.at(t + d, Ev::Deliver(input));
            }
            return;
        }
        let next = t + ASK_EVERY.div_f64(h.successor_rate);
        self.at(next, Ev::SuccessorLooks);
    }

    /// The deadline by the rule (this node's clock): the lease's, or a proof's while it stands.
    pub(super) fn ground_deadline(&self) -> Duration {
        let proof = self.hold.as_ref().and_then(|h| h.proof_deadline);
        self.deadline.max(proof.unwrap_or_default())
    }

    /// The shell's look at the service, as the real one reads it: a unit through
    /// service::process::read_unit_show from what systemctl printed — which, when it cannot
    /// reach systemd (PID 1 re-executing), is nothing on stdout and an error on stderr — and a
    /// group from the kernel's answer, or a /proc that cannot be read.
    pub(super) fn look_at_service(&mut self) -> Presence {
        let fails = self.rng.chance(self.s.check_fails);
        self.reached.doubts += u32::from(fails);
        let up = self.m.kernel.service;
        if self.s.unit {
            let (code, out, err) = if fails {
                (
                    Some(1),
                    String::new(),
                    "Failed to connect to bus: Connection refused",
                )
            } else {
                let state = if up { "deactivating" } else { "inactive" };
                (
                    Some(0),
                    format!("LoadState=loaded\nActiveState={state}\nSubState=x\n"),
                    "",
                )
            };
            crate::service::process::read_unit_show(code, &out, err)
        } else if fails {
            Presence::CannotTell("cannot read /proc (simulated)".into())
        } else if up {
            Presence::Present
        } else {
            Presence::Absent
        }
    }

    /// etcd and the guard's renewal task, for one keepalive the machine ordered at `sent`
    /// (its clock), sent now. The attempt's bound is timed on this node's clock.
    pub(super) fn keepalive(&mut self, sent: Duration) {
        let now = self.now();
        let timeout = self
            .s
            .clock
            .renewal_attempt_timeout()
            .div_f64(self.s.node_rate);
        let fail = |e: RenewError| Ev::Deliver(answers::renewal(LEASE, sent, &Err(e)));
        match self.s.member(now) {
            Member::Normal | Member::Slow => {
                let (d1, d2) = if self.s.member(now) == Member::Slow {
                    (self.rng.ms(0, 4_000), self.rng.ms(0, 4_000))
                } else {
                    (self.rng.ms(0, 20), self.rng.ms(0, 20))
                };
                let ev = Ev::EtcdRenews {
                    sent,
                    sent_true: now,
                    reply_in: d2,
                };
                self.at(now + d1, ev);
                if d1 + d2 > timeout {
                    let e = RenewError::TimedOut("no answer in time (simulated)".into());
                    self.at(now + timeout, fail(e));
                }
            }
            Member::Silent => {
                let e = RenewError::TimedOut("silent member (simulated)".into());
                self.at(now + timeout, fail(e));
            }
            Member::Refusing => {
                let d = self.rng.ms(0, 2);
                let e = RenewError::Failed("refused (simulated)".into());
                self.at(now + d, fail(e));
            }
        }
    }
}
