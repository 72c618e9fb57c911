//! Holding through an etcd outage (docs/safety.md, "Holding through an etcd outage"). With a
//! failsafe record written at the key's taking (the plan's `hold`), a guard whose renewals
//! fail for want of an answer — never for etcd's own "gone" or "another's" — asks its
//! corosync every ASK_EVERY once it is within PROOF_LIFE of its lease's deadline. An answer
//! that the cluster is whole (quorate, and every node of the nodelist in this node's
//! membership: in a two-node cluster both halves keep quorum, so quorum alone proves nothing)
//! is a proof: the guard may hold until it was asked plus PROOF_LIFE, and everything it holds
//! is gone by FENCE_BOUND after that (Leadership::cover; other nodes wait that long after the
//! node left their membership: failsafe::clearance). Past the lease's deadline it is Holding:
//! - a later answer that the cluster is not whole fences at once; no fresh proof within
//!   PROOF_LIFE fences at its end (the ordinary deadline, moved by the proof);
//! - keepalives go on (every RETRY_HOLDING): a lease etcd still keeps (it extends leases when
//!   it elects a leader) is renewed and the guard leads again, touching nothing; a lease etcd
//!   let go is taken back with a new one (Order::Retake), only while the key is absent and the
//!   record still names this node;
//! - the key deleted while our lease lives, or carrying another lease, fences at once, as
//!   when leading;
//! - the VIP's lifetime and the watchdog move on a fresh proof only.
//!
//! A proof also needs what the hold stands on to be there still, read at the same ask: the
//! nodelist the failsafe record names (takers are nodes of it), this node online with its
//! controller in its own Pacemaker (when Pacemaker started the guard: a node whose controller
//! is gone has its resource recovered elsewhere), and, under etcd_outage=auto, fencing on
//! with power devices only. Any of them gone is a "no" (Cause::HoldWithdrawn); Pacemaker not
//! answering is "cannot tell".

use std::time::Duration;

use super::state::{Phase, State};
use super::types::{Cause, Kernel, Level, Order, Regrant, RetakeError};
use super::{Machine, Timer};
use crate::failsafe::witness::Cluster;
use crate::failsafe::{OwnView, ASK_EVERY, ASK_LIMIT, FENCE_BOUND, PROOF_LIFE};
use crate::rules::Rule;

/// What a proof must show besides a whole cluster, fixed when the record was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldPlan {
    /// The nodelist's ids as the failsafe record names them.
    pub nodelist: Vec<u32>,
    /// etcd_outage=auto: fencing on, with power devices only (failsafe::clearance::Fencing).
    pub power_fencing: bool,
    /// Started by Pacemaker: this node online with its controller.
    pub pacemaker: bool,
}

/// What one ask's answers come to.
enum Verdict {
    /// The cluster is whole and the hold's ground is there: corosync's words.
    Proof(Cluster),
    /// A definite no.
    No(Cause),
    /// No answer that says either.
    CannotTell(String),
}

/// A keepalive that failed while holding is tried again this much later (etcd is out: there
/// is no member to race for).
pub(super) const RETRY_HOLDING: Duration = Duration::from_millis(250);
/// A retake that failed (etcd out still) is tried again this much later.
const RETAKE_RETRY: Duration = Duration::from_millis(500);
/// A pause of this node (a VM stopped by its hypervisor: its boot clock, its VIP's kernel
/// lifetime and its emulated watchdog stand still with it) shows between two asks as the RTC
/// running ahead of the boot clock by more than this: the RTC counts whole seconds, so each of
/// the two readings may be up to a second behind, and each is read a little after its ask.
const PAUSE_SLACK: Duration = Duration::from_secs(2);
/// While holding, the hold and its proof are logged this often.
const HOLD_LOG_EVERY: Duration = Duration::from_secs(30);

/// When an ask out is given up: the shell answers within ASK_LIMIT; one lost on the way is
/// not waited for longer than twice that.
fn given_up(asked: Duration) -> Duration {
    asked + ASK_LIMIT * 2
}

/// What the hold shows the rest of the guard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldView {
    /// A failsafe record was written: the guard may hold.
    pub enabled: bool,
    /// Holding since (boot clock).
    pub since: Option<Duration>,
    /// The latest proof: when it was asked, and what corosync said then.
    pub proof: Option<(Duration, String)>,
    /// When etcd last answered (boot clock).
    pub etcd_seen: Duration,
}

/// The hold's own state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Hold {
    /// What a proof must show besides a whole cluster; None: no failsafe record, no hold.
    plan: Option<HoldPlan>,
    /// The latest proof: when it was asked, and what corosync said then.
    proof: Option<(Duration, String)>,
    /// When etcd last answered (boot clock).
    etcd_seen: Duration,
    /// The ask out (when it was asked), and when the last one went.
    ask_out: Option<Duration>,
    last_asked: Option<Duration>,
    /// The latest ask answered (answers older than it say nothing).
    answered: Option<Duration>,
    /// The watch or a confirm said the key is gone while holding: whether our lease lives
    /// (explicit deletion: fence) or not (taken back) is the next renewal's to say.
    key_gone: bool,
    /// etcd said our lease is gone: take the key back.
    lease_gone: bool,
    /// Keepalives failed in a row since the last renewal applied (etcd may be out while
    /// any has).
    failed_in_row: u32,
    retake_out: bool,
    /// The last doubt said (logged once).
    doubt: Option<String>,
    /// corosync's last answer (only the mutation tests' mistake reads it).
    last_seen: Option<Cluster>,
    /// When the hold was last logged.
    logged: Option<Duration>,
    /// The RTC's reading at the latest ask answered with one (the ask's time, the reading).
    rtc_seen: Option<(Duration, u64)>,
}

impl Hold {
    pub(super) fn new(plan: Option<HoldPlan>, since: Duration) -> Hold {
        Hold {
            etcd_seen: since,
            plan,
            ..Hold::default()
        }
    }

    /// The hold as the view shows it, holding since `since` (the machine's state says).
    pub(super) fn view(&self, since: Option<Duration>) -> HoldView {
        HoldView {
            enabled: self.plan.is_some(),
            since,
            proof: self.proof.clone(),
            etcd_seen: self.etcd_seen,
        }
    }

    pub(super) fn etcd_answered(&mut self, now: Duration) {
        self.etcd_seen = self.etcd_seen.max(now);
    }
}

impl<K: Kernel> Machine<K> {
    /// Whether the hold applies now: enabled, not fenced, leading, holding, or stepping down
    /// (the service may take its grace to stop, past the lease's deadline: on a proof still).
    fn may_hold(&self) -> bool {
        let up = self.phase().is_leading() || self.phase() == Phase::SteppingDown;
        self.hold.plan.is_some() && self.fenced().is_none() && up
    }

    /// Everything the hold calls for at `now`: the phase (into or out of Holding), the next
    /// ask of corosync, the retake.
    pub(super) fn hold_step(&mut self, now: Duration) {
        if !self.may_hold() {
            self.timers.clear(Timer::Ask);
            self.timers.clear(Timer::Retake);
            return;
        }
        let lease_deadline = self.leadership.lease_deadline();
        match self.phase() {
            Phase::Leading if now >= lease_deadline => {
                // The deadline is past and we were not fenced: a proof covers it.
                let proof = self.hold.proof.clone().map(|p| p.1);
                self.hold.logged = Some(now);
                self.set_state(State::Up {
                    holding_since: Some(now),
                });
                self.log(
                    Level::Warn,
                    format!(
                        "etcd has not renewed the lease since {:.1} s ago: holding the VIP and \
                         the service on corosync's word ({}), asking it every {} ms",
                        now.saturating_sub(self.renewal.last_sent).as_secs_f64(),
                        proof.unwrap_or_default(),
                        ASK_EVERY.as_millis()
                    ),
                );
                self.out(Order::Persist);
            }
            Phase::Holding if now < lease_deadline => {
                let since = self.holding_since().unwrap_or(now);
                self.set_state(State::Up {
                    holding_since: None,
                });
                self.hold.key_gone = false;
                self.hold.lease_gone = false;
                self.hold.logged = None;
                self.log(
                    Level::Info,
                    format!(
                        "etcd answers again: leading on the lease after holding for {:.1} s \
                         (last proof: {})",
                        now.saturating_sub(since).as_secs_f64(),
                        self.proof_words()
                    ),
                );
                // The outage is over: its proof is history (the next one is said afresh).
                self.hold.proof = None;
                self.out(Order::Persist);
            }
            Phase::Holding => {
                let since = self.holding_since().unwrap_or(now);
                if self.hold.logged.is_none_or(|t| now >= t + HOLD_LOG_EVERY) {
                    self.hold.logged = Some(now);
                    let words = self.proof_words();
                    self.log(
                        Level::Warn,
                        format!(
                            "holding the VIP and the service through an etcd outage for {:.1} s \
                             on corosync's word ({words}); etcd last answered {:.1} s ago",
                            now.saturating_sub(since).as_secs_f64(),
                            now.saturating_sub(self.hold.etcd_seen).as_secs_f64()
                        ),
                    );
                }
            }
            _ => {}
        }
        self.plan_ask(lease_deadline);
        self.plan_retake(now);
    }

    /// When the next ask of corosync goes: only while etcd is not keeping the lease (a
    /// keepalive failed since the last one applied), from PROOF_LIFE before the lease's
    /// deadline (a proof is then at hand when the deadline passes), ASK_EVERY after the last.
    /// A healthy etcd costs no ask.
    fn next_ask(&self, lease_deadline: Duration) -> Option<Duration> {
        let from = lease_deadline.saturating_sub(PROOF_LIFE);
        let next = self
            .hold
            .last_asked
            .map_or(from, |a| (a + ASK_EVERY).max(from));
        (self.hold.failed_in_row > 0).then_some(next)
    }

    /// Timer::Ask at the ask out's end (the shell answers within ASK_LIMIT; one lost on the
    /// way is given up then), or at the next ask.
    fn plan_ask(&mut self, lease_deadline: Duration) {
        let at = match self.hold.ask_out {
            Some(asked) => Some(given_up(asked)),
            None => self.next_ask(lease_deadline),
        };
        match at {
            Some(at) => self.timers.set(Timer::Ask, at),
            None => self.timers.clear(Timer::Ask),
        }
    }

    /// Timer::Ask: the ask out given up, and the next ask when it is due.
    pub(super) fn ask(&mut self, now: Duration) {
        if let Some(asked) = self.hold.ask_out {
            if now < given_up(asked) {
                return;
            }
            self.hold.ask_out = None;
        }
        let due = self
            .next_ask(self.leadership.lease_deadline())
            .is_some_and(|next| now >= next);
        if !self.may_hold() || !due {
            return;
        }
        self.hold.ask_out = Some(now);
        self.hold.last_asked = Some(now);
        let (fencing, online) = self
            .hold
            .plan
            .as_ref()
            .map_or((false, false), |p| (p.power_fencing, p.pacemaker));
        self.out(Order::AskMembership {
            asked: now,
            fencing,
            online,
        });
    }

    /// The latest proof in words, with how old it is.
    fn proof_words(&self) -> String {
        match &self.hold.proof {
            Some((asked, said)) => format!("{said}, asked at {:.1} s", asked.as_secs_f64()),
            None => "none".into(),
        }
    }

    /// A keepalive failed (no answer, or no usable one): etcd may be out. How many failed in
    /// a row since the last renewal applied.
    pub(super) fn renewal_failed(&mut self) -> u32 {
        self.hold.failed_in_row = self.hold.failed_in_row.saturating_add(1);
        self.hold.failed_in_row
    }

    /// A renewal applied: etcd keeps the lease (a proof gathered before the deadline, never
    /// held on, is history; while holding, the move back to Leading says it first).
    pub(super) fn renewal_applied(&mut self, now: Duration) {
        self.hold.failed_in_row = 0;
        self.hold.etcd_answered(now);
        if self.holding_since().is_none() {
            self.hold.proof = None;
        }
    }

    /// corosync's (and Pacemaker's) answer to the ask made at `asked`.
    pub(super) fn membership(
        &mut self,
        now: Duration,
        asked: Duration,
        seen: Result<Cluster, String>,
        pacemaker: OwnView,
    ) {
        if self.hold.ask_out == Some(asked) {
            self.hold.ask_out = None;
        }
        // Answers older than one already taken say nothing (one ask is out at a time; this
        // keeps a lost one that comes back late from undoing a newer verdict).
        if self.hold.answered.is_some_and(|a| asked <= a) || !self.may_hold() {
            return;
        }
        self.hold.answered = Some(asked);
        let seen = match (seen, &self.hold.last_seen) {
            // The mistake (a mutation test): corosync silent, its last answer taken again.
            (Err(_), Some(last)) if !self.holds(Rule::FreshProof) => Ok(last.clone()),
            (seen, _) => seen,
        };
        if let Ok(c) = &seen {
            self.hold.last_seen = Some(c.clone());
        }
        let paused = self.paused(asked, pacemaker.rtc);
        let verdict = match paused {
            Some(why) => Verdict::No(Cause::HoldWithdrawn(why)),
            None => self.verdict(seen, pacemaker),
        };
        match verdict {
            Verdict::Proof(c) => {
                self.hold.doubt = None;
                let first = self.hold.proof.is_none();
                self.hold.proof = Some((asked, c.describe()));
                self.leadership.cover(asked, PROOF_LIFE, FENCE_BOUND);
                if first && self.holding_since().is_none() {
                    self.log(
                        Level::Warn,
                        format!(
                            "etcd has not renewed the lease for {:.1} s; corosync: {} — the \
                             guard will hold the VIP and the service past the lease's deadline \
                             while this lasts",
                            now.saturating_sub(self.renewal.last_sent).as_secs_f64(),
                            c.describe()
                        ),
                    );
                }
                // A fresh proof moves the VIP's lifetime and the watchdog's reset, and only
                // a fresh proof does, while etcd is out.
                if self.vip.state == super::state::VipState::Up {
                    self.extend_vip();
                }
                self.ping_watchdog();
            }
            Verdict::No(cause) => {
                self.hold.proof = None;
                self.leadership.void_cover();
                // Past the lease's deadline only the proof covered: it ends now.
                if now >= self.leadership.lease_deadline() {
                    self.fence(now, cause);
                } else {
                    self.log(
                        Level::Warn,
                        format!("etcd not answering: no hold ({cause})"),
                    );
                }
            }
            Verdict::CannotTell(why) => {
                if self.hold.doubt.as_ref() != Some(&why) {
                    self.log(Level::Warn, why.clone());
                    self.hold.doubt = Some(why);
                }
            }
        }
    }

    /// Whether this node was paused since the last ask answered with an RTC reading: the RTC
    /// ran ahead of the boot clock by more than PAUSE_SLACK. After a pause its corosync may
    /// answer from its old membership for up to a token timeout — a "whole" that the others no
    /// longer share, who may have taken over meanwhile.
    fn paused(&mut self, asked: Duration, rtc: Option<u64>) -> Option<String> {
        let rtc = rtc?;
        let last = self.hold.rtc_seen.replace((asked, rtc));
        if !self.holds(Rule::PauseSeen) {
            return None;
        }
        let (then, was) = last?;
        let boot = asked.saturating_sub(then);
        let ran = Duration::from_secs(rtc.saturating_sub(was));
        (ran > boot + PAUSE_SLACK).then(|| {
            format!(
                "this node was paused: its RTC ran {} s while its boot clock ran {:.1} s, and \
                 its corosync may still answer from the membership it had before",
                ran.as_secs(),
                boot.as_secs_f64()
            )
        })
    }

    /// What corosync's and Pacemaker's answers to one ask come to, by the hold's plan.
    fn verdict(&self, seen: Result<Cluster, String>, pacemaker: OwnView) -> Verdict {
        let c = match seen {
            Ok(c) => c,
            Err(why) => return Verdict::CannotTell(format!("corosync: {why}")),
        };
        if !self.whole(&c) {
            return Verdict::No(Cause::ClusterNotWhole(c.describe()));
        }
        let none = HoldPlan::default();
        let plan = self.hold.plan.as_ref().unwrap_or(&none);
        if c.ids() != plan.nodelist {
            return Verdict::No(Cause::HoldWithdrawn(format!(
                "the nodelist is now {:?}, the failsafe record names {:?}",
                c.ids(),
                plan.nodelist
            )));
        }
        if !self.holds(Rule::FencingWatched) {
            // The mistake: Pacemaker read once, when the key was taken.
            return Verdict::Proof(c);
        }
        if plan.power_fencing {
            match &pacemaker.fencing {
                None => {
                    return Verdict::CannotTell(
                        "Pacemaker did not say how the cluster fences".into(),
                    )
                }
                Some(f) if !f.ends_processes() => {
                    return Verdict::No(Cause::HoldWithdrawn(format!(
                        "Pacemaker: {} (etcd_outage=auto holds only with power fencing)",
                        f.describe()
                    )))
                }
                Some(_) => {}
            }
        }
        if plan.pacemaker {
            match pacemaker.online {
                None => {
                    return Verdict::CannotTell(
                        "Pacemaker did not say whether this node is online".into(),
                    )
                }
                Some(false) => {
                    return Verdict::No(Cause::HoldWithdrawn(
                        "Pacemaker does not show this node online with its controller: the \
                         cluster may recover the master elsewhere"
                            .into(),
                    ))
                }
                Some(true) => {}
            }
        }
        Verdict::Proof(c)
    }

    /// The cluster is whole: quorate, and every node of the nodelist in this node's
    /// membership (this one included).
    fn whole(&self, c: &Cluster) -> bool {
        if !self.holds(Rule::AllMembers) {
            // The mistake: quorum alone, which both halves of a two-node cluster keep.
            return c.quorate;
        }
        c.quorate && c.missing().is_empty() && c.members.contains(&c.me)
    }

    /// The watch or a confirm said the key was deleted: while holding, not yet a loss (etcd
    /// deletes it with a lease it let go, and the key is then taken back).
    pub(super) fn key_deleted(&mut self, now: Duration) {
        if self.holding_since().is_some() {
            self.hold.key_gone = true;
        } else {
            self.lost(now, Cause::KeyDeleted);
        }
    }

    /// etcd said our lease is gone: while holding, take the key back; else a loss.
    pub(super) fn lease_gone(&mut self, now: Duration) {
        self.hold.etcd_answered(now);
        if self.holding_since().is_some() && self.may_hold() {
            if !self.hold.lease_gone {
                self.log(
                    Level::Warn,
                    "etcd answers, and has let the lease go: taking the key back".into(),
                );
            }
            self.hold.lease_gone = true;
        } else {
            self.lost(now, Cause::LeaseGone);
        }
    }

    /// A renewal answered with a TTL: with the key seen deleted meanwhile, someone deleted it
    /// under a live lease — a loss.
    pub(super) fn renewed_while_key_gone(&mut self, now: Duration) -> bool {
        self.hold.etcd_answered(now);
        if self.hold.key_gone {
            self.hold.key_gone = false;
            self.lost(now, Cause::KeyDeleted);
            return true;
        }
        false
    }

    /// Timer::Retake at once when etcd let the lease go while holding, unless a retake is out
    /// or a failed one waits for its retry.
    fn plan_retake(&mut self, now: Duration) {
        if !self.retake_wanted() {
            return self.timers.clear(Timer::Retake);
        }
        if !self.timers.armed(Timer::Retake) {
            self.timers.set(Timer::Retake, now);
        }
    }

    fn retake_wanted(&self) -> bool {
        self.holding_since().is_some() && self.hold.lease_gone && !self.hold.retake_out
    }

    /// Timer::Retake: the key taken back under a new lease.
    pub(super) fn retake(&mut self) {
        if self.retake_wanted() {
            self.hold.retake_out = true;
            self.out(Order::Retake);
        }
    }

    /// The retake's outcome.
    pub(super) fn retaken(&mut self, now: Duration, r: Result<Regrant, RetakeError>) {
        self.hold.retake_out = false;
        if !self.may_hold() {
            return;
        }
        match r {
            Ok(Regrant { sent, ttl }) => {
                self.hold.etcd_answered(now);
                self.hold.lease_gone = false;
                self.hold.key_gone = false;
                self.hold.failed_in_row = 0;
                self.leadership.regrant(sent, ttl);
                self.renewal.last_sent = self.renewal.last_sent.max(sent);
                self.renewal.out = None;
                self.plan_renewal(sent + self.plan.clock.keepalive_interval());
                self.log(
                    Level::Info,
                    "the key is ours again, with a new lease".into(),
                );
                self.ping_watchdog();
                if self.vip.state == super::state::VipState::Up {
                    self.extend_vip();
                }
                self.out(Order::Persist);
            }
            Err(RetakeError::Taken(other)) => {
                self.hold.etcd_answered(now);
                self.lost(
                    now,
                    match other {
                        Some(l) => Cause::KeyTaken(l),
                        None => Cause::KeyDeleted,
                    },
                );
            }
            Err(RetakeError::RecordChanged) => {
                self.hold.etcd_answered(now);
                self.lost(now, Cause::RecordLost);
            }
            Err(RetakeError::Failed(why)) => {
                self.log(Level::Warn, format!("taking the key back: {why}"));
                self.timers.set(Timer::Retake, now + RETAKE_RETRY);
            }
        }
    }
}
