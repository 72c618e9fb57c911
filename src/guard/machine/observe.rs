//! What the guard observes of its service and its VIP while it leads — the health watch's
//! verdicts, the wire watch's claims on the VIP and its losses — recorded here for the view
//! (status, metrics), and what follows decided here: Pacemaker told at once (a push) when a
//! healthy service turns unhealthy or exits, or the VIP is lost; the VIP defended on the wire.
//! The shell reports what it saw and performs the orders; it decides none of this.

use std::collections::BTreeMap;
use std::time::Duration;

use super::state::VipState;
use super::types::{Kernel, Level, Order};
use super::Machine;

/// At most one defence of the VIP (one announcement) this often.
const DEFEND_INTERVAL: Duration = Duration::from_secs(10);
/// At most this many claiming MAC addresses are named in the log.
const LOGGED_MACS: usize = 16;

/// The health watch's verdict on the service (service::health::HealthCount decides it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    pub healthy: bool,
    /// In words: what the last check found.
    pub detail: String,
    /// systemd says the unit is no longer active (service= mode).
    pub unit_inactive: bool,
}

/// How the VIP went, as the wire watch saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// The address was deleted from its interface: by another program, by the kernel at the
    /// end of its lifetime (the machine tells them apart by the lifetime it gave), or with its
    /// link (`with_link`: IPv6 addresses go when their link goes down).
    Deleted { with_link: bool },
    /// Its interface was set down or removed (an IPv4 address stays on a downed link,
    /// unusable).
    LinkDown,
}

/// How the VIP was lost, as `hamaster_vip_lost_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Deleted from its interface by someone else.
    Deleted,
    /// Its interface set down or removed.
    LinkDown,
    /// Deleted by the kernel at the end of its lifetime: no renewal came in time.
    Expired,
}

impl Loss {
    pub const ALL: [Loss; 3] = [Loss::Deleted, Loss::LinkDown, Loss::Expired];

    pub fn label(self) -> &'static str {
        match self {
            Loss::Deleted => "deleted",
            Loss::LinkDown => "link_down",
            Loss::Expired => "expired",
        }
    }
}

/// Another host claiming the VIP on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The address claimed last (one of the master's VIPs).
    pub address: String,
    /// The MAC address that claimed it.
    pub mac: String,
    /// The kind of frame: "ARP reply", "ARP request", "neighbor advertisement".
    pub frame: String,
    /// When the last one was seen (boot clock).
    pub last: Duration,
}

/// A frame from another host claiming the VIP, as the wire watch read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The VIP claimed (one of the master's addresses).
    pub address: String,
    pub mac: String,
    pub frame: String,
    /// In words, for the log and Pacemaker.
    pub what: String,
    /// conflict_action=push is in force: Pacemaker is told.
    pub push: bool,
}

/// What the machine has observed, for its view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The health watch's last verdict (None: none yet).
    pub health: Option<HealthReport>,
    /// The last claim seen (the frames are counted by address).
    pub conflict: Option<Conflict>,
    /// Frames that claimed each address (the master's VIPs), for status and metrics.
    pub conflicts_by_address: BTreeMap<String, u64>,
    /// How the VIP was lost, in words (the first loss of the leadership).
    pub lost: Option<String>,
    /// Losses counted, by `Loss`.
    pub losses: [u64; Loss::ALL.len()],
    /// MACs named in the log so far.
    logged_macs: Vec<String>,
    /// When each address was last defended.
    last_defence: BTreeMap<String, Duration>,
}

impl Observed {
    /// Frames that claimed any of the addresses.
    pub fn conflict_frames(&self) -> u64 {
        self.conflicts_by_address.values().sum()
    }
}

impl<K: Kernel> Machine<K> {
    /// The health watch's verdict: a service that was healthy and turns unhealthy while the
    /// machine leads is told to Pacemaker at once (not a service the guard stops itself).
    pub(super) fn health_checked(&mut self, now: Duration, report: HealthReport) {
        let was_healthy = self.observed.health.as_ref().is_some_and(|h| h.healthy);
        if was_healthy && !report.healthy && self.phase().is_leading() {
            self.push(now, format!("service unhealthy: {}", report.detail), false);
        }
        self.observed.health = Some(report);
    }

    /// The supervised command's leader exited while the machine leads: told at once.
    pub(super) fn push_exit(&mut self, now: Duration, detail: &str) {
        if self.phase().is_leading() {
            self.push(now, format!("service {detail}"), false);
        }
    }

    /// What Pacemaker is told at once (push_failures; conflict_action=push whatever it says).
    /// A campaign's guard has no Pacemaker to tell: the same words end its leadership, by a
    /// step-down of its own.
    fn push(&mut self, now: Duration, why: String, regardless: bool) {
        if !self.plan.campaign {
            return self.out(Order::Push { why, regardless });
        }
        if self.phase().is_raising() || self.phase().is_leading() {
            self.log(Level::Error, format!("campaign: {why}: stepping down"));
            self.step_down(now, now + super::DEFAULT_STEP_DOWN);
        }
    }

    /// The VIP (one of its addresses) gone from under the guard: never extended again;
    /// unless the guard took it down itself, recorded once, counted, and told to Pacemaker at
    /// once.
    pub(super) fn vip_gone(&mut self, now: Duration, how: Gone, detail: String) {
        // Leading with the VIP up: the change is not the guard's own doing.
        let behind_our_back = self.phase().is_leading() && self.vip.state == VipState::Up;
        let loss = match how {
            Gone::Deleted { with_link: true } | Gone::LinkDown => Loss::LinkDown,
            Gone::Deleted { .. } if now >= self.vip.floor => Loss::Expired,
            Gone::Deleted { .. } => Loss::Deleted,
        };
        // One address deleted: never extended again (a replace would add it anew). Others of
        // the master's VIPs (extra_vips) may still be up: the next lowering removes them all.
        if matches!(how, Gone::Deleted { .. }) && self.vip.state == VipState::Up {
            self.vip.state = VipState::MaybeUp;
            self.out(Order::Persist);
        }
        if !behind_our_back || self.observed.lost.is_some() {
            return;
        }
        let detail = match loss {
            Loss::Expired => {
                "the VIP's kernel lifetime ran out: no renewal came in time to extend it".into()
            }
            _ => detail,
        };
        self.observed.losses[loss as usize] += 1;
        self.log(
            Level::Error,
            format!("{detail}; the VIP is not added back (Pacemaker recovers it)"),
        );
        self.observed.lost = Some(detail.clone());
        self.push(now, detail, false);
    }

    /// A frame from another host claiming the VIP, while the machine leads with it up:
    /// counted and named (each MAC once in the log), the address claimed defended with one
    /// announcement at most every DEFEND_INTERVAL while the lease covers the VIP, and told to
    /// Pacemaker where conflict_action=push (`push`).
    pub(super) fn vip_claimed(&mut self, now: Duration, claim: Claim) {
        if !self.phase().is_leading() || self.vip.state != VipState::Up {
            return;
        }
        let Claim {
            address,
            mac,
            frame,
            what,
            push,
        } = claim;
        let new_mac = self.observed.logged_macs.len() < LOGGED_MACS
            && !self.observed.logged_macs.contains(&mac);
        if new_mac {
            self.observed.logged_macs.push(mac.clone());
        }
        let defend = self.view().may_defend(now)
            && self
                .observed
                .last_defence
                .get(&address)
                .is_none_or(|t| now >= *t + DEFEND_INTERVAL);
        if new_mac || defend {
            self.log(Level::Error, what.clone());
        }
        if defend {
            self.observed.last_defence.insert(address.clone(), now);
            self.out(Order::Defend {
                address: address.clone(),
            });
        }
        if push {
            self.push(now, what, true);
        }
        *self
            .observed
            .conflicts_by_address
            .entry(address.clone())
            .or_default() += 1;
        self.observed.conflict = Some(Conflict {
            address,
            mac,
            frame,
            last: now,
        });
    }
}
