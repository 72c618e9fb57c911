//! The machine's own unit tests, on the simulation's host (guard::sim::World, the one kernel
//! double, which records every call). The rules over every fault schedule are the
//! simulation's (guard::sim).

use std::time::Duration;

use super::*;
use crate::failsafe::{ASK_EVERY, PROOF_LIFE};
pub(crate) use crate::guard::sim::{Call, World};
use crate::lease::LeaseClock;
use crate::service::ServiceRef;

#[test]
fn a_ping_that_took_effect_late_is_made_again_shorter() {
    let clock = LeaseClock {
        ttl: Duration::from_secs(10),
        margin: Duration::from_secs(2),
    };
    let plan = Plan {
        clock,
        vip: false,
        known: None,
        watchdog: WatchdogPlan::Required,
        hold: None,
        take_back: false,
        campaign: false,
    };
    let t = Duration::from_millis;
    let mut m = Machine::new(plan, t(0), clock.ttl, World::plain());
    m.kernel.now = t(20);
    m.handle(t(20), Input::Tick);
    assert!(matches!(
        m.watchdog(),
        WatchdogState::Armed { timeout_s: 8, .. }
    ));
    // A renewal sent at 3.33 s, answered at 3.35 s; the ping lands 1.5 s later.
    m.kernel.calls.clear();
    m.kernel.now = t(3350);
    m.kernel.ping_late = t(1500);
    m.handle(
        t(3350),
        Input::Renewed {
            sent: t(3330),
            ttl: clock.ttl,
        },
    );
    // 8 s asked at 3.35 s; at 4.85 s only 7 s still fit: asked again.
    assert_eq!(m.kernel.watchdog_asks(), [8, 7]);
    let WatchdogState::Armed { timeout_s, pinged } = m.watchdog().clone() else {
        panic!("{:?}", m.watchdog());
    };
    let r = crate::lease::clock::MAX_SLEW;
    let since = (pinged.as_secs_f64() - 3.33) / (1.0 - r);
    let true_reset = since + f64::from(timeout_s) * (1.0 + WATCHDOG_TOLERANCE);
    assert!(true_reset <= 10.0 / (1.0 + r), "{true_reset}");
    assert!(m.fenced().is_none());
}

/// The leadership of a lease sent at 100 s with `ttl` and `margin` seconds.
pub(crate) fn lead(ttl: u64, margin: u64) -> Leadership {
    let clock = LeaseClock {
        ttl: Duration::from_secs(ttl),
        margin: Duration::from_secs(margin),
    };
    Leadership::new(clock, Duration::from_secs(100), clock.ttl)
}

/// A machine with a VIP, no service and no watchdog, leading from 0 with the lease given.
fn vip_machine(ttl: u64, margin: u64) -> Machine<World> {
    let clock = LeaseClock {
        ttl: Duration::from_secs(ttl),
        margin: Duration::from_secs(margin),
    };
    let plan = Plan {
        clock,
        vip: true,
        known: None,
        watchdog: WatchdogPlan::Off,
        hold: None,
        take_back: false,
        campaign: false,
    };
    Machine::new(plan, Duration::ZERO, clock.ttl, World::plain())
}

#[test]
fn the_vip_is_defended_only_while_leading_with_it_up_and_the_lease_covering_it() {
    let t = Duration::from_millis;
    let mut m = vip_machine(10, 2);
    m.handle(t(10), Input::Tick);
    assert!(m.phase().is_raising());
    m.handle(t(20), Input::Settled(Ok(())));
    assert!(
        !m.view().may_defend(t(20)),
        "raising: the burst announces, not a defence"
    );
    m.handle(t(30), Input::TokenWritten(Ok(())));
    m.handle(t(40), Input::ServiceStarted(Ok(ServiceRef::Group(12345))));
    assert_eq!(m.phase(), Phase::Leading, "{:?}", m.failure());
    assert_eq!(m.vip(), VipState::Up);
    assert!(m.view().may_defend(t(50)));
    assert!(!m.view().may_defend(m.fence_at()), "past the fencing time");
    m.handle(m.fence_at(), Input::Tick);
    assert!(m.fenced().is_some());
    assert!(!m.view().may_defend(m.fence_at()), "fenced");
}

/// The clients are told (Order::Repoint) once the VIP is settled, never before, never after a
/// failed settle, and the rounds may go on only while the VIP is up and the lease covers it.
#[test]
fn the_clients_are_told_only_after_the_vip_settled_and_while_it_is_ours() {
    let t = Duration::from_millis;
    let repoints = |m: &mut Machine<World>| {
        let mut n = 0;
        while let Some(o) = m.poll_order() {
            n += usize::from(o == Order::Repoint);
        }
        n
    };
    let mut m = vip_machine(10, 2);
    m.handle(t(10), Input::Tick);
    assert_eq!(repoints(&mut m), 0, "not before the VIP is settled");
    assert!(
        m.view().may_repoint(t(10)),
        "the VIP is up while it settles"
    );
    m.handle(t(20), Input::Settled(Ok(())));
    assert_eq!(repoints(&mut m), 1);
    m.handle(t(30), Input::TokenWritten(Ok(())));
    m.handle(t(40), Input::ServiceStarted(Ok(ServiceRef::Group(12345))));
    assert_eq!(m.phase(), Phase::Leading);
    assert_eq!(repoints(&mut m), 0, "once per raise");
    assert!(
        m.view().may_repoint(t(50)),
        "the rounds go on while leading"
    );
    assert!(
        !m.view().may_repoint(m.fence_at()),
        "not past the fencing time"
    );
    m.handle(m.fence_at(), Input::Tick);
    assert!(
        !m.view().may_repoint(m.fence_at()),
        "fenced: the VIP is gone"
    );

    let mut failed = vip_machine(10, 2);
    failed.handle(t(10), Input::Tick);
    failed.handle(t(20), Input::Settled(Err(Fault::Settle("DAD".into()))));
    assert_eq!(repoints(&mut failed), 0, "a failed settle tells no one");
    assert!(!failed.view().may_repoint(t(30)));
}

#[test]
fn the_release_after_a_failed_raise_is_not_a_loss_and_the_failure_stays_the_reason() {
    let t = Duration::from_millis;
    let mut m = vip_machine(3, 1);
    m.handle(t(10), Input::Tick);
    let mut orders = Vec::new();
    while let Some(o) = m.poll_order() {
        orders.push(o);
    }
    // DAD may take the kernel up to about 2 s: the settle is not cut at the deadline.
    assert!(
        orders.iter().any(
            |o| matches!(o, Order::Settle { dad_wait } if *dad_wait == crate::vip::up::DAD_WAIT)
        ),
        "{orders:?}"
    );
    m.handle(
        t(1500),
        Input::Settled(Err(Fault::Settle("DAD did not finish".into()))),
    );
    assert_eq!(m.phase(), Phase::Failed);
    let mut released = false;
    while let Some(o) = m.poll_order() {
        released |= matches!(o, Order::Release);
    }
    assert!(released, "everything down: the key is released");
    // While the release is out, the watch sees the key go (our own deletion), then
    // another node's key.
    m.handle(t(1505), Input::KeyLost(None));
    m.handle(t(1507), Input::KeyLost(Some(7)));
    assert!(m.fenced().is_none(), "{:?}", m.fenced());
    assert_eq!(m.problem().as_deref(), Some("VIP: DAD did not finish"));
    m.handle(t(1510), Input::Released(Ok(())));
    let mut exit = None;
    while let Some(o) = m.poll_order() {
        if let Order::Exit { raise_failed, .. } = o {
            exit = Some(raise_failed);
        }
    }
    assert_eq!(exit, Some(true), "the guard ends as a failed raise");
}

#[test]
fn a_fence_after_a_failed_raise_is_named_after_the_failure() {
    let t = Duration::from_millis;
    let mut m = vip_machine(3, 1);
    m.handle(t(10), Input::Tick);
    assert_eq!(m.problem().as_deref(), Some("raising VIP and service"));
    // The VIP cannot be removed yet: nothing is released while it may be up.
    m.kernel.remove_fault = Some(crate::guard::sim::RemoveFault::Always);
    m.handle(
        t(1500),
        Input::Settled(Err(Fault::Settle("DAD failed".into()))),
    );
    // Before the release began: the key taken by another node is a loss.
    m.handle(t(1505), Input::KeyLost(Some(7)));
    assert!(m.fenced().is_some());
    assert_eq!(m.phase(), Phase::Failed, "a failed raise stays failed");
    let problem = m.problem().unwrap();
    assert!(
        problem.starts_with("VIP: DAD failed; then fenced: leader key now carries another lease"),
        "{problem}"
    );
}

/// A VIP machine raised and leading at 40 ms (lease from 0), its orders so far drained.
fn leading(ttl: u64, margin: u64) -> Machine<World> {
    raised(vip_machine(ttl, margin))
}

/// `m` raised and leading at 40 ms (its service a command's group), its orders drained.
fn raised(mut m: Machine<World>) -> Machine<World> {
    let t = Duration::from_millis;
    m.handle(t(10), Input::Tick);
    m.handle(t(20), Input::Settled(Ok(())));
    m.handle(t(30), Input::TokenWritten(Ok(())));
    m.handle(t(40), Input::ServiceStarted(Ok(ServiceRef::Group(12345))));
    assert_eq!(m.phase(), Phase::Leading, "{:?}", m.failure());
    drain(&mut m);
    m
}

fn drain(m: &mut Machine<World>) -> Vec<Order> {
    std::iter::from_fn(|| m.poll_order()).collect()
}

fn pushes(orders: &[Order]) -> Vec<(String, bool)> {
    orders
        .iter()
        .filter_map(|o| match o {
            Order::Push { why, regardless } => Some((why.clone(), *regardless)),
            _ => None,
        })
        .collect()
}

fn health(healthy: bool, detail: &str) -> Input {
    Input::Health(HealthReport {
        healthy,
        detail: detail.into(),
        unit_inactive: false,
    })
}

#[test]
fn a_service_that_was_healthy_and_turns_unhealthy_is_pushed_once() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    // Not yet healthy: failing checks before the first pass are no failure.
    m.handle(t(50), health(false, "refused"));
    assert!(pushes(&drain(&mut m)).is_empty());
    assert!(!m.view().service_healthy());
    m.handle(t(60), health(true, "answered 200"));
    assert!(m.view().service_healthy());
    m.handle(t(70), health(false, "answered 503"));
    assert_eq!(
        pushes(&drain(&mut m)),
        [("service unhealthy: answered 503".to_string(), false)]
    );
    assert!(!m.view().service_healthy());
    // Still unhealthy: nothing new to tell.
    m.handle(t(80), health(false, "answered 503 again"));
    assert!(pushes(&drain(&mut m)).is_empty());
}

#[test]
fn a_campaigns_guard_steps_down_where_another_would_push_to_pacemaker() {
    let t = Duration::from_millis;
    let mut m = raised_from(Plan {
        campaign: true,
        ..plan_10_2()
    });
    assert_eq!(m.phase(), Phase::Leading);
    drain(&mut m);
    m.handle(t(50), Input::ServiceExited("exited with status 1".into()));
    let orders = drain(&mut m);
    assert!(
        pushes(&orders).is_empty(),
        "no Pacemaker to tell: {orders:?}"
    );
    assert_eq!(m.phase(), Phase::SteppingDown, "{orders:?}");
    assert!(
        orders
            .iter()
            .any(|o| matches!(o, Order::Log(_, text) if text.contains("campaign: service exited"))),
        "{orders:?}"
    );
    // The same exit under Pacemaker is pushed, and the machine leads on (Pacemaker decides).
    let mut m = raised_from(plan_10_2());
    drain(&mut m);
    m.handle(t(50), Input::ServiceExited("exited with status 1".into()));
    let orders = drain(&mut m);
    assert_eq!(pushes(&orders).len(), 1, "{orders:?}");
    assert_eq!(m.phase(), Phase::Leading);
}

#[test]
fn a_service_the_guard_stops_itself_is_no_failure_to_push() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    m.handle(t(50), health(true, "answered 200"));
    m.handle(t(60), Input::StepDown { by: t(5000) });
    assert_ne!(m.phase(), Phase::Leading);
    m.handle(t(70), health(false, "refused"));
    m.handle(t(80), Input::ServiceExited("exited 0".into()));
    assert!(pushes(&drain(&mut m)).is_empty());
}

#[test]
fn a_vip_deleted_while_leading_is_counted_told_once_and_never_extended() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    let gone = |with_link| Input::VipGone {
        how: Gone::Deleted { with_link },
        detail: "VIP deleted by another program".into(),
    };
    m.handle(t(100), gone(false));
    assert_eq!(
        m.vip(),
        VipState::MaybeUp,
        "never extended again, removed when lowered"
    );
    assert_eq!(
        pushes(&drain(&mut m)),
        [("VIP deleted by another program".to_string(), false)]
    );
    m.handle(t(200), gone(true));
    assert!(pushes(&drain(&mut m)).is_empty(), "told once");
    let v = m.view();
    assert_eq!(v.observed.losses, [1, 0, 0]);
    assert_eq!(
        v.observed.lost.as_deref(),
        Some("VIP deleted by another program")
    );
    // The master's other addresses (extra_vips) are taken down by the lowering.
    m.handle(t(300), Input::StepDown { by: t(5000) });
    assert_eq!(m.vip(), VipState::Absent);
}

/// An extension that failed (for one of several VIPs the others may have taken the new
/// lifetime): the floor stays the old lifetime's; a call that ended past it gives the VIPs up.
#[test]
fn a_failed_extension_keeps_the_old_floor_and_a_late_one_gives_the_vips_up() {
    let t = Duration::from_millis;
    for (takes, up) in [(t(5), true), (t(60_000), false)] {
        let mut m = leading(10, 2);
        let floor = m.view().vip_floor;
        m.kernel.extend_fails = true;
        m.kernel.extend_takes = takes;
        m.kernel.now = t(3350);
        m.handle(
            t(3350),
            Input::Renewed {
                sent: t(3330),
                ttl: Duration::from_secs(10),
            },
        );
        match up {
            true => {
                assert_eq!(m.vip(), VipState::Up);
                assert_eq!(m.view().vip_floor, floor, "the old floor kept");
            }
            false => assert_ne!(m.vip(), VipState::Up, "given up after a late call"),
        }
    }
}

#[test]
fn a_deletion_past_the_vip_floor_is_the_kernels_expiry() {
    let mut m = leading(10, 2);
    let floor = m.view().vip_floor;
    m.handle(
        floor,
        Input::VipGone {
            how: Gone::Deleted { with_link: false },
            detail: "deleted".into(),
        },
    );
    assert_eq!(m.view().observed.losses[Loss::Expired as usize], 1);
    let told = pushes(&drain(&mut m));
    assert!(told[0].0.contains("lifetime ran out"), "{told:?}");
}

#[test]
fn a_link_set_down_is_a_loss_but_the_address_may_stay() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    m.handle(
        t(100),
        Input::VipGone {
            how: Gone::LinkDown,
            detail: "link lan0 was set down".into(),
        },
    );
    assert_eq!(m.view().observed.losses[Loss::LinkDown as usize], 1);
    // An IPv4 address stays on a downed link: it is still ours to remove.
    assert_eq!(m.vip(), VipState::Up);
    assert_eq!(pushes(&drain(&mut m)).len(), 1);
}

#[test]
fn the_guards_own_removal_is_no_loss() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    m.handle(t(100), Input::KeyLost(None));
    assert!(m.fenced().is_some());
    drain(&mut m);
    m.handle(
        t(110),
        Input::VipGone {
            how: Gone::Deleted { with_link: false },
            detail: "deleted".into(),
        },
    );
    assert!(pushes(&drain(&mut m)).is_empty());
    assert_eq!(m.view().observed.losses, [0, 0, 0]);
    assert!(m.view().observed.lost.is_none());
}

#[test]
fn a_claim_is_defended_at_most_every_defend_interval_and_pushed_when_asked() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    let claim_of = |address: &str, push| {
        Input::VipClaimed(Claim {
            address: address.into(),
            mac: "02:00:00:00:00:09".into(),
            frame: "ARP reply".into(),
            what: "VIP conflict".into(),
            push,
        })
    };
    let claim = |push| claim_of("192.0.2.10", push);
    let defends = |o: &[Order], address: &str| {
        o.iter()
            .filter(|o| {
                **o == Order::Defend {
                    address: address.into(),
                }
            })
            .count()
    };
    m.handle(t(100), claim(false));
    let o = drain(&mut m);
    assert_eq!(defends(&o, "192.0.2.10"), 1, "{o:?}");
    assert!(pushes(&o).is_empty(), "conflict_action=defend: not told");
    m.handle(t(200), claim(true));
    let o = drain(&mut m);
    assert_eq!(defends(&o, "192.0.2.10"), 0, "one defence per interval");
    assert_eq!(pushes(&o), [("VIP conflict".to_string(), true)]);
    // Another address claimed meanwhile: defended alone, its own interval.
    m.handle(t(250), claim_of("2001:db8::10", false));
    let o = drain(&mut m);
    assert_eq!(defends(&o, "2001:db8::10"), 1, "{o:?}");
    assert_eq!(defends(&o, "192.0.2.10"), 0, "only the address claimed");
    let v = m.view().observed;
    let c = v.conflict.as_ref().unwrap();
    assert_eq!((c.address.as_str(), c.last), ("2001:db8::10", t(250)));
    assert_eq!(v.conflict_frames(), 3);
    assert_eq!(v.conflicts_by_address["192.0.2.10"], 2);
    // Renewed meanwhile (every keepalive answered at once), so the lease still covers the
    // VIP ten seconds later.
    for ms in (300..10_100).step_by(100) {
        m.kernel.now = t(ms);
        m.handle(t(ms), Input::Tick);
        for o in drain(&mut m) {
            if let Order::Keepalive { sent } = o {
                let ttl = Duration::from_secs(10);
                m.handle(t(ms), Input::Renewed { sent, ttl });
            }
        }
    }
    m.kernel.now = t(10_100);
    m.handle(t(10_100), claim(false));
    assert_eq!(
        defends(&drain(&mut m), "192.0.2.10"),
        1,
        "{:?}",
        m.failure()
    );
}

/// What corosync says of a three-node cluster with `members` in this node's (n1's) view.
fn cluster(members: &[u32]) -> crate::failsafe::witness::Cluster {
    let ring = format!("1.{}", members.len());
    crate::failsafe::witness::three_nodes(1, members, &ring)
}

/// A leading machine with a failsafe record (lease 10/2 from 0), whose keepalives from now on
/// fail: asks of corosync are answered with `members` at once. Runs until `until`, returning
/// the orders seen.
fn hold_machine() -> Machine<World> {
    raised_from(Plan {
        hold: Some(super::HoldPlan {
            nodelist: vec![1, 2, 3],
            power_fencing: true,
            pacemaker: true,
        }),
        ..plan_10_2()
    })
}

/// Pacemaker's answer where the hold's ground stands: power fencing, this node online.
fn grounded() -> crate::failsafe::OwnView {
    crate::failsafe::OwnView {
        fencing: Some(crate::failsafe::clearance::Fencing {
            enabled: true,
            fabric: vec![],
        }),
        online: Some(true),
        rtc: None,
    }
}

/// The machine of `plan` (its lease granted at 0), raised and leading at 40 ms.
fn raised_from(plan: Plan) -> Machine<World> {
    let ttl = plan.clock.ttl;
    raised(Machine::new(plan, Duration::ZERO, ttl, World::plain()))
}

/// A VIP, no watchdog, a lease of 10 s with a margin of 2 s, nothing else.
fn plan_10_2() -> Plan {
    Plan {
        clock: LeaseClock {
            ttl: Duration::from_secs(10),
            margin: Duration::from_secs(2),
        },
        vip: true,
        known: None,
        watchdog: WatchdogPlan::Off,
        hold: None,
        take_back: false,
        campaign: false,
    }
}

/// Runs the machine from `from` to `to` (ms) in 100 ms steps: keepalives fail (etcd silent),
/// corosync answers every ask with `members(t)`. Returns every order.
fn run_outage(
    m: &mut Machine<World>,
    from: u64,
    to: u64,
    members: impl Fn(u64) -> Vec<u32>,
) -> Vec<Order> {
    run_outage_with(m, from, to, members, |_| grounded())
}

/// The same, Pacemaker answering every ask with `pacemaker(t)`.
fn run_outage_with(
    m: &mut Machine<World>,
    from: u64,
    to: u64,
    members: impl Fn(u64) -> Vec<u32>,
    pacemaker: impl Fn(u64) -> crate::failsafe::OwnView,
) -> Vec<Order> {
    let t = Duration::from_millis;
    let mut seen = Vec::new();
    for ms in (from..to).step_by(100) {
        m.kernel.now = t(ms);
        m.handle(t(ms), Input::Tick);
        for o in drain(m) {
            match &o {
                Order::Keepalive { sent } => m.handle(
                    t(ms),
                    Input::RenewFailed {
                        sent: *sent,
                        why: "silent".into(),
                    },
                ),
                Order::AskMembership {
                    asked,
                    fencing,
                    online,
                } => {
                    // Only what was asked is answered.
                    assert!(*fencing && *online, "{o:?}");
                    m.handle(
                        t(ms),
                        Input::Membership {
                            asked: *asked,
                            seen: Ok(cluster(&members(ms))),
                            pacemaker: pacemaker(ms),
                        },
                    )
                }
                _ => {}
            }
            seen.push(o);
        }
    }
    seen
}

/// Ticks from `from` (ms) until the machine sends a keepalive (within two seconds): its send
/// time.
fn next_keepalive(m: &mut Machine<World>, from: u64) -> Duration {
    let t = Duration::from_millis;
    for ms in (from..from + 2_000).step_by(50) {
        m.kernel.now = t(ms);
        m.handle(t(ms), Input::Tick);
        let sent = drain(m).into_iter().find_map(|o| match o {
            Order::Keepalive { sent } => Some(sent),
            _ => None,
        });
        if let Some(sent) = sent {
            return sent;
        }
    }
    panic!("no keepalive within two seconds of {from} ms");
}

#[test]
fn a_whole_cluster_holds_past_the_deadline_and_etcd_back_ends_the_hold_untouched() {
    let t = Duration::from_millis;
    let mut m = hold_machine();
    let orders = run_outage(&mut m, 100, 20_000, |_| vec![1, 2, 3]);
    // No ask while etcd renewed; then every ASK_EVERY.
    let asks: Vec<Duration> = orders
        .iter()
        .filter_map(|o| match o {
            Order::AskMembership { asked, .. } => Some(*asked),
            _ => None,
        })
        .collect();
    assert!(asks[0] >= t(5_000), "{asks:?}");
    assert!(asks
        .windows(2)
        .all(|w| w[1] - w[0] >= crate::failsafe::ASK_EVERY));
    assert_eq!(m.phase(), Phase::Holding, "{:?}", m.fenced());
    assert!(m.fenced().is_none());
    assert_eq!(m.vip(), VipState::Up);
    let v = m.view();
    assert!(v.hold.since.is_some() && v.hold.proof.is_some());
    // etcd answers again: the same lease, extended by its new leader.
    let sent = next_keepalive(&mut m, 20_000);
    m.handle(
        sent + t(10),
        Input::Renewed {
            sent,
            ttl: Duration::from_secs(10),
        },
    );
    assert_eq!(m.phase(), Phase::Leading);
    assert!(m.fenced().is_none() && m.vip() == VipState::Up);
    assert!(m.view().hold.since.is_none());
}

#[test]
fn a_node_missing_from_the_membership_fences_a_holder_at_once() {
    let t = Duration::from_millis;
    let mut m = hold_machine();
    run_outage(&mut m, 100, 12_000, |_| vec![1, 2, 3]);
    assert_eq!(m.phase(), Phase::Holding);
    run_outage(&mut m, 12_000, 12_600, |_| vec![1, 2]);
    let Some((at, Cause::ClusterNotWhole(why))) = m.fenced().cloned() else {
        panic!("{:?}", m.fenced());
    };
    assert!(
        at <= t(12_600) && why.contains("missing n3"),
        "{at:?} {why}"
    );
    assert_eq!(m.vip(), VipState::Absent);
}

#[test]
fn quorum_alone_is_no_proof_and_no_answer_lets_the_hold_lapse() {
    let t = Duration::from_millis;
    // Quorate but n3 missing from the start: no hold, fenced at the lease's deadline.
    let mut m = hold_machine();
    run_outage(&mut m, 100, 10_000, |_| vec![1, 2]);
    assert!(
        matches!(m.fenced(), Some((at, Cause::Deadline)) if *at <= t(8_100)),
        "{:?}",
        m.fenced()
    );
    // Holding, then corosync silent: the hold lapses PROOF_LIFE after the last proof.
    let mut m = hold_machine();
    run_outage(&mut m, 100, 12_000, |_| vec![1, 2, 3]);
    let last = m.view().hold.proof.unwrap().0;
    for ms in (12_000..20_000).step_by(100) {
        m.kernel.now = t(ms);
        m.handle(t(ms), Input::Tick);
        for o in drain(&mut m) {
            if let Order::AskMembership { asked, .. } = o {
                m.handle(
                    t(ms + 1000),
                    Input::Membership {
                        asked,
                        seen: Err("no answer".into()),
                        pacemaker: grounded(),
                    },
                );
            }
        }
    }
    let Some((at, Cause::HoldLapsed)) = m.fenced().cloned() else {
        panic!("{:?}", m.fenced());
    };
    assert!(
        at >= last + crate::failsafe::PROOF_LIFE
            && at <= last + crate::failsafe::PROOF_LIFE + t(100)
    );
}

#[test]
fn a_hold_whose_ground_goes_fences_at_the_next_answer_and_pacemaker_silent_lets_it_lapse() {
    let t = Duration::from_millis;
    let whole = |_| vec![1, 2, 3];
    let fencing = |enabled, fabric: &[&str]| crate::failsafe::OwnView {
        fencing: Some(crate::failsafe::clearance::Fencing {
            enabled,
            fabric: fabric.iter().map(|s| s.to_string()).collect(),
        }),
        ..grounded()
    };
    let offline = crate::failsafe::OwnView {
        online: Some(false),
        ..grounded()
    };
    // Holding from 8 s; at 12 s fencing is turned off, a fabric device added, or this node's
    // controller is gone: the next answer fences, whatever corosync says.
    for (changed, words) in [
        (fencing(false, &[]), "fencing disabled"),
        (fencing(true, &["scsi"]), "fabric device scsi"),
        (offline.clone(), "not show this node online"),
    ] {
        let mut m = hold_machine();
        let c = changed.clone();
        run_outage_with(&mut m, 100, 16_000, whole, move |ms| match ms {
            ..12_000 => grounded(),
            _ => c.clone(),
        });
        let Some((at, Cause::HoldWithdrawn(why))) = m.fenced().cloned() else {
            panic!("{words}: {:?}", m.fenced());
        };
        assert!(why.contains(words), "{why}");
        assert!(at >= t(12_000) && at <= t(12_000) + ASK_EVERY, "{at:?}");
        // The mistake: Pacemaker read only when the key was taken — holds on.
        let mut m = hold_machine();
        m.mutant.rules = crate::rules::Rules::without(crate::rules::Rule::FencingWatched);
        run_outage_with(&mut m, 100, 16_000, whole, move |_| changed.clone());
        assert!(m.fenced().is_none(), "{words}");
    }
    // A node added to the nodelist (and the membership): the record's takers are other nodes.
    let mut m = hold_machine();
    let grown = |ms: u64| match ms {
        ..12_000 => cluster(&[1, 2, 3]),
        _ => {
            let mut c = cluster(&[1, 2, 3, 4]);
            c.nodelist.push(crate::failsafe::witness::Node {
                id: Some(4),
                name: "n4".into(),
            });
            c
        }
    };
    for ms in (100..16_000).step_by(100) {
        m.kernel.now = t(ms);
        m.handle(t(ms), Input::Tick);
        for o in drain(&mut m) {
            match o {
                Order::Keepalive { sent } => m.handle(
                    t(ms),
                    Input::RenewFailed {
                        sent,
                        why: "silent".into(),
                    },
                ),
                Order::AskMembership { asked, .. } => m.handle(
                    t(ms),
                    Input::Membership {
                        asked,
                        seen: Ok(grown(ms)),
                        pacemaker: grounded(),
                    },
                ),
                _ => {}
            }
        }
    }
    assert!(
        matches!(m.fenced(), Some((at, Cause::HoldWithdrawn(w))) if w.contains("nodelist") && *at <= t(12_500)),
        "{:?}",
        m.fenced()
    );
    // Pacemaker silent: cannot tell, so no proof — the hold lapses PROOF_LIFE after the last.
    let mut m = hold_machine();
    let silent = crate::failsafe::OwnView::default();
    run_outage_with(&mut m, 100, 20_000, whole, move |ms| match ms {
        ..12_000 => grounded(),
        _ => silent.clone(),
    });
    let Some((at, Cause::HoldLapsed)) = m.fenced().cloned() else {
        panic!("{:?}", m.fenced());
    };
    assert!(
        at >= t(12_000) + PROOF_LIFE - ASK_EVERY && at <= t(12_000) + PROOF_LIFE + t(100),
        "{at:?}"
    );
}

#[test]
fn a_pause_seen_by_the_rtc_running_ahead_of_the_boot_clock_fences_a_hold() {
    let t = Duration::from_millis;
    // The RTC follows the boot clock (whole seconds, from 1000 s) until 12 s; then the node
    // was paused for 20 s: its boot clock stood still, the RTC ran on.
    let rtc = |ms: u64| crate::failsafe::OwnView {
        rtc: Some(1_000 + ms / 1_000 + if ms >= 12_000 { 20 } else { 0 }),
        ..grounded()
    };
    let mut m = hold_machine();
    run_outage_with(&mut m, 100, 16_000, |_| vec![1, 2, 3], rtc);
    let Some((at, Cause::HoldWithdrawn(why))) = m.fenced().cloned() else {
        panic!("{:?}", m.fenced());
    };
    assert!(
        why.contains("paused") && why.contains("RTC ran 21 s"),
        "{why}"
    );
    assert!(at >= t(12_000) && at <= t(12_000) + ASK_EVERY, "{at:?}");
    // A second's step of a whole-second RTC is no pause.
    let mut m = hold_machine();
    run_outage_with(
        &mut m,
        100,
        16_000,
        |_| vec![1, 2, 3],
        |ms| crate::failsafe::OwnView {
            rtc: Some(1_000 + ms / 1_000 + u64::from(ms >= 12_000)),
            ..grounded()
        },
    );
    assert!(m.fenced().is_none(), "{:?}", m.fenced());
    // The mistake: the stale "whole" after the resume believed.
    let mut m = hold_machine();
    m.mutant.rules = crate::rules::Rules::without(crate::rules::Rule::PauseSeen);
    run_outage_with(&mut m, 100, 16_000, |_| vec![1, 2, 3], rtc);
    assert!(m.fenced().is_none(), "{:?}", m.fenced());
}

#[test]
fn a_lease_etcd_let_go_is_taken_back_and_a_key_taken_fences() {
    let t = Duration::from_millis;
    let mut m = hold_machine();
    run_outage(&mut m, 100, 15_000, |_| vec![1, 2, 3]);
    assert_eq!(m.phase(), Phase::Holding);
    // The watch sees the key go with the lease etcd let expire: no fence yet.
    m.handle(t(15_000), Input::KeyLost(None));
    assert!(m.fenced().is_none());
    // etcd answers that the lease is gone: take the key back.
    m.handle(t(15_050), Input::LeaseGone { sent: t(15_000) });
    m.kernel.now = t(15_100);
    m.handle(t(15_100), Input::Tick);
    assert!(drain(&mut m).contains(&Order::Retake));
    m.handle(
        t(15_200),
        Input::Retaken(Ok(Regrant {
            sent: t(15_150),
            ttl: Duration::from_secs(10),
        })),
    );
    assert_eq!(m.phase(), Phase::Leading);
    assert!(m.fenced().is_none() && m.vip() == VipState::Up);
    assert!(m.deadline() >= t(23_000), "{:?}", m.deadline());
    // Another time: the key carries another lease when the retake comes.
    let mut m = hold_machine();
    run_outage(&mut m, 100, 15_000, |_| vec![1, 2, 3]);
    m.handle(t(15_050), Input::LeaseGone { sent: t(15_000) });
    m.kernel.now = t(15_100);
    m.handle(t(15_100), Input::Tick);
    drain(&mut m);
    m.handle(t(15_200), Input::Retaken(Err(RetakeError::Taken(Some(7)))));
    assert!(matches!(m.fenced(), Some((_, Cause::KeyTaken(7)))));
    // And: the key deleted by hand while our lease still lives.
    let mut m = hold_machine();
    run_outage(&mut m, 100, 15_000, |_| vec![1, 2, 3]);
    m.handle(t(15_000), Input::KeyLost(None));
    let sent = next_keepalive(&mut m, 15_000);
    assert!(m.fenced().is_none());
    m.handle(
        sent + t(10),
        Input::Renewed {
            sent,
            ttl: Duration::from_secs(10),
        },
    );
    assert!(
        matches!(m.fenced(), Some((_, Cause::KeyDeleted))),
        "{:?}",
        m.fenced()
    );
}

/// A warm master whose service has demote_command (Plan::take_back), leading from 0 with a
/// lease of 10 s, margin 2 s.
fn warm_machine() -> Machine<World> {
    raised_from(Plan {
        known: Some(ServiceRef::Group(12345)),
        take_back: true,
        campaign: false,
        ..plan_10_2()
    })
}

/// warm_machine with a lease of 30 s and a margin of 10 s: a fence leaves the hook time.
fn warm_machine_30_10() -> Machine<World> {
    raised_from(Plan {
        clock: LeaseClock {
            ttl: Duration::from_secs(30),
            margin: Duration::from_secs(10),
        },
        known: Some(ServiceRef::Group(12345)),
        take_back: true,
        campaign: false,
        ..plan_10_2()
    })
}

/// The take-back's budget, from the orders (None: none ordered); whether a release was.
fn take_back_and_release(orders: &[Order]) -> (Option<Duration>, bool) {
    let within = orders.iter().find_map(|o| match o {
        Order::TakeBack { within } => Some(*within),
        _ => None,
    });
    (within, orders.iter().any(|o| matches!(o, Order::Release)))
}

#[test]
fn a_role_given_back_in_time_leaves_the_service_running_and_then_the_key_is_released() {
    let t = Duration::from_millis;
    let mut m = warm_machine();
    m.kernel.now = t(1000);
    m.handle(t(1000), Input::StepDown { by: t(21_000) });
    let (within, released) = take_back_and_release(&drain(&mut m));
    // 18 s until the service must be gone (the budget less the release's reserve): 9 s for
    // the hook, 9 s left for the TERM's grace.
    assert_eq!(within, Some(Duration::from_secs(9)));
    assert!(!released, "the role is not given back yet");
    assert!(m.kernel.signals().is_empty(), "the hook goes first");
    m.handle(t(1300), Input::TakenBack(Ok(())));
    assert_eq!(m.view().service, ServiceState::GivenBack);
    let (_, released) = take_back_and_release(&drain(&mut m));
    assert!(released, "given back, VIP down: the key is released");
    assert!(
        m.kernel.signals().is_empty(),
        "a standby now: never signalled"
    );
}

#[test]
fn a_take_back_that_fails_stops_the_service_before_the_release() {
    let t = Duration::from_millis;
    let mut m = warm_machine();
    m.handle(t(1000), Input::StepDown { by: t(21_000) });
    drain(&mut m);
    m.handle(
        t(1100),
        Input::TakenBack(Err(Fault::Service("demote_command exit status: 1".into()))),
    );
    assert_eq!(m.kernel.signals(), [false], "TERM at once");
    let (_, released) = take_back_and_release(&drain(&mut m));
    assert!(!released, "not confirmed stopped");
    m.handle(
        t(1200),
        Input::ServiceChecked(crate::presence::Presence::Absent),
    );
    let (_, released) = take_back_and_release(&drain(&mut m));
    assert!(released);
    // A late confirmation changes nothing.
    m.handle(t(1300), Input::TakenBack(Ok(())));
    assert_eq!(m.view().service, ServiceState::Stopped);
}

#[test]
fn a_take_back_that_hangs_after_a_fence_ends_in_a_stop_before_the_kill_time() {
    let t = Duration::from_millis;
    let mut m = warm_machine_30_10();
    let fence_at = m.fence_at();
    m.kernel.now = fence_at;
    m.handle(fence_at, Input::Tick);
    assert!(m.fenced().is_some());
    let (within, _) = take_back_and_release(&drain(&mut m));
    let within = within.expect("the hook goes first after a fence too");
    let kill_at = m.kill_time(fence_at);
    assert!(within > Duration::ZERO && fence_at + within * 2 <= kill_at + t(1));
    assert!(m.kernel.signals().is_empty());
    // Silent: at the budget's end the service gets TERM, KILL at its time.
    let end = fence_at + within;
    assert_eq!(m.next_wake(), Some(end));
    m.kernel.now = end;
    m.handle(end, Input::Tick);
    assert_eq!(m.kernel.signals(), [false]);
    m.kernel.now = kill_at;
    m.handle(kill_at, Input::Tick);
    assert_eq!(m.kernel.signals(), [false, true]);
    // A confirmation after the budget is not believed: only absence counts.
    m.handle(kill_at + t(10), Input::TakenBack(Ok(())));
    assert!(m.view().service.may_run());

    // Lease 10 s, margin 2 s: the fence leaves less than TAKE_BACK_MIN, the service is
    // stopped at once.
    let mut m = warm_machine();
    let fence_at = m.fence_at();
    m.handle(fence_at, Input::Tick);
    let (within, _) = take_back_and_release(&drain(&mut m));
    assert_eq!(within, None);
    assert_eq!(m.kernel.signals(), [false]);
}

#[test]
fn a_confirmation_queued_past_the_budget_or_from_an_exited_service_is_not_believed() {
    let t = Duration::from_millis;
    // Handled after the budget's end (the thread woke late, the answer came first); the lease
    // still runs.
    let mut m = warm_machine_30_10();
    m.handle(t(1000), Input::StepDown { by: t(21_000) });
    let (within, _) = take_back_and_release(&drain(&mut m));
    let end = t(1000) + within.unwrap();
    m.kernel.now = end + t(5);
    m.handle(end + t(5), Input::TakenBack(Ok(())));
    assert_eq!(m.kernel.signals(), [false], "stopped instead");
    assert!(m.view().service.may_run());

    // The leader exited while the hook ran: what is left of its group is stopped.
    let mut m = warm_machine();
    m.handle(t(1000), Input::StepDown { by: t(21_000) });
    drain(&mut m);
    m.handle(t(1100), Input::ServiceExited("exited with status 0".into()));
    assert_eq!(m.kernel.signals(), [false]);
    m.handle(t(1150), Input::TakenBack(Ok(())));
    assert!(m.view().service.may_run(), "not given back: stopping");

    // The leader exited before the step-down: no hook, a stop.
    let mut m = warm_machine();
    m.handle(t(500), Input::ServiceExited("exited with status 0".into()));
    m.handle(
        t(600),
        Input::ServiceChecked(crate::presence::Presence::Present),
    );
    m.handle(t(1000), Input::StepDown { by: t(21_000) });
    let (within, _) = take_back_and_release(&drain(&mut m));
    assert_eq!(within, None);
    assert_eq!(m.kernel.signals(), [false]);

    // A step-down with little budget: no hook, a stop.
    let mut m = warm_machine();
    m.handle(t(1000), Input::StepDown { by: t(3_500) });
    let (within, _) = take_back_and_release(&drain(&mut m));
    assert_eq!(within, None);
    assert_eq!(m.kernel.signals(), [false]);
}

/// The kernel's calls in their order, as the host records them: a loss first clears the
/// host's standing (the shell's starts and announcements stop at once), then takes the VIP
/// down, then signals the service; the raise made one call (the VIP added, no watchdog).
#[test]
fn a_loss_clears_the_standing_then_removes_the_vip_then_terms_the_service() {
    let t = Duration::from_millis;
    let mut m = leading(10, 2);
    assert!(
        matches!(m.kernel.calls[..], [Call::AddVip(_)]),
        "{:?}",
        m.kernel.calls
    );
    m.kernel.calls.clear();
    m.handle(t(100), Input::KeyLost(Some(9)));
    // Told again by the VIP's own take-down (idempotent).
    let mut calls = m.kernel.calls.clone();
    calls.dedup();
    assert_eq!(
        calls[..3],
        [
            Call::Lowering,
            Call::RemoveVip,
            Call::Signal { kill: false }
        ],
        "{:?}",
        m.kernel.calls
    );
}
