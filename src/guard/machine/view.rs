//! What the machine shows the rest of the guard: one value, copied out after each step and
//! published by the fencing thread (guard::fence). Status, state.json, metrics and the
//! shell's questions (may it announce, defend, start the service?) read it, never the
//! machine itself.

use std::time::Duration;

use super::hold::HoldView;
use super::observe::Observed;
use super::state::{RaiseStep, ServiceState, State, VipState};
use super::watchdog::WatchdogState;

/// What the machine shows the rest of the guard (`Machine::view`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The phase, with what only it has (`phase()` names it).
    pub state: State,
    pub vip: VipState,
    pub service: ServiceState,
    /// What the service's leader said when it exited.
    pub exit_detail: Option<String>,
    /// What is wrong, in words (`Machine::problem`).
    pub problem: Option<String>,
    pub deadline: Duration,
    /// When the guard fences itself (its deadline, or before the watchdog's reset).
    pub fence_at: Duration,
    pub last_renewal_sent: Duration,
    pub watchdog: WatchdogState,
    /// watchdog=auto and its reset may come after the lease's end (said in the log).
    pub watchdog_late: bool,
    /// The kernel keeps the VIP at least until then (its lifetime's end, less HZ/50): a
    /// deletion seen after it is the kernel's, at the end of the lifetime.
    pub vip_floor: Duration,
    /// What the guard observed of the service and the VIP (health, claims, losses).
    pub observed: Observed,
    /// Holding through an etcd outage: whether it may, since when, on what proof.
    pub hold: HoldView,
}

impl View {
    fn may_raise(&self, now: Duration) -> bool {
        self.state.may_raise(now, self.fence_at)
    }

    /// Whether announcements for the VIP may go on (the raise is ours to finish).
    pub fn may_announce(&self, now: Duration) -> bool {
        self.may_raise(now) && self.vip == VipState::Up
    }

    /// Whether the last master's clients may be told of the takeover now (Order::Repoint's
    /// rounds): the VIP up and ours, raising or leading, the lease covering it.
    pub fn may_repoint(&self, now: Duration) -> bool {
        let phase = self.state.phase();
        (phase.is_raising() || phase.is_leading())
            && self.vip == VipState::Up
            && now < self.fence_at
    }

    /// Whether a conflict on the wire may be answered with an announcement of the VIP: the
    /// machine leads with it up, and the lease still covers it.
    pub fn may_defend(&self, now: Duration) -> bool {
        self.state.phase().is_leading() && self.vip == VipState::Up && now < self.fence_at
    }

    /// Whether the service's start is still wanted: asked by the shell right before it
    /// spawns, so a start that waited in the queue never runs after ownership is lost.
    pub fn wants_service(&self, now: Duration) -> bool {
        self.may_raise(now) && self.state == State::Raising(RaiseStep::StartingService)
    }

    /// The service runs as the machine sees it: started, not exited, not being stopped, and
    /// (a unit) not found inactive by systemd.
    pub fn service_running(&self) -> bool {
        let unit_inactive = self
            .observed
            .health
            .as_ref()
            .is_some_and(|h| h.unit_inactive);
        matches!(self.service, ServiceState::Running(_))
            && self.exit_detail.is_none()
            && !unit_inactive
    }

    /// Running and found healthy by the health watch's last verdict.
    pub fn service_healthy(&self) -> bool {
        self.service_running() && self.observed.health.as_ref().is_some_and(|h| h.healthy)
    }
}
