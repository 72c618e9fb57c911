//! The guard's rules that the mutation tests switch off, one at a time, to show that the
//! simulation (guard::sim) notices each one missing: the machine's, and the takeover rule's
//! (failsafe::clearance), which is why this sits below both. In a test build `Rules` holds
//! which rule is off; in a production build it is empty and every rule holds (the checks
//! compile away): the production machine has no switch.

/// One rule of the machine (docs/safety.md names each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Fence at the deadline.
    Deadline,
    /// Release only once VIP and service are confirmed down.
    ReleaseWhenDown,
    /// Ownership lost while raising fences at once (else: queued until the raise is over).
    LossFencesTheRaise,
    /// A step-down answers by its budget.
    Budget,
    /// The lease counts from the keepalive's send time (else: from its answer).
    SendTime,
    /// The watchdog is armed before anything is raised (else: after the VIP).
    ArmFirst,
    /// The watchdog is pinged only for a renewal applied in time (else: at every wake-up).
    PingOnRenewal,
    /// The watchdog is disarmed only once VIP and service are down (else: at the step-down).
    DisarmWhenDown,
    /// The watchdog's timeout ends before the lease can (else: the whole TTL).
    WatchdogBound,
    /// Only a proven absence is absence (else: a look that cannot tell counts as stopped).
    OnlyAbsence,
    /// Every bound derives from the lease's earliest end at the largest slew (else: from send
    /// time + TTL, the deadline uncapped).
    Slew,
    /// Every effect is timed by the clock read right before it (else: by the time the input
    /// came in).
    OwnTime,
    /// The VIP's lifetime is set again only while the address surely is there (else: every
    /// renewal replaces it, which adds it anew once the kernel let it go).
    ReplaceBeforeFloor,
    /// A hold needs every node of the nodelist in the membership (else: quorum alone, which
    /// both halves of a two-node cluster keep).
    AllMembers,
    /// Only a fresh answer proves the cluster whole: an ask corosync did not answer is no
    /// proof (else: the last answer stands in for it, a membership that may be long gone).
    FreshProof,
    /// Another node takes over after a failsafe record naming a live node only once the
    /// takeover rule clears it (else: as soon as the key is gone; failsafe::clearance).
    RecordWait,
    /// A taker proves things of a holder only inside the holder's own cluster (its name and
    /// nodelist, the holder matched by node id), else only the operator clears (else: a node
    /// the taker's corosync does not know counts as out of its membership).
    HomeCluster,
    /// Pacemaker's "not promoted" clears only with power fencing on and the holder's node
    /// online with its controller (else: believed whatever the node's state).
    LiveController,
    /// A fence proves a node down only where no fence device of the cluster leaves its
    /// processes running (fabric fencing; else: fencing enabled is enough).
    PowerFence,
    /// A proof needs the holder's own Pacemaker still there (its node online) and, under
    /// etcd_outage=auto, fencing still on and of power devices only, read at every ask (else:
    /// read once, when the key was taken).
    FencingWatched,
    /// A pause of the holder's node (its RTC ahead of its boot clock between two asks) ends
    /// the hold (else: its corosync's stale "whole" after the resume is believed).
    PauseSeen,
}

/// Which rule is off (test builds only).
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    pub off: Option<Rule>,
}

#[cfg(test)]
impl Rules {
    /// Every rule.
    pub fn all() -> Rules {
        Rules { off: None }
    }

    /// Every rule but `rule`.
    pub fn without(rule: Rule) -> Rules {
        Rules { off: Some(rule) }
    }

    pub fn holds(&self, rule: Rule) -> bool {
        self.off != Some(rule)
    }
}

/// Every rule, always (production builds).
#[cfg(not(test))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules;

#[cfg(not(test))]
impl Rules {
    pub fn all() -> Rules {
        Rules
    }

    #[inline(always)]
    pub fn holds(&self, _rule: Rule) -> bool {
        true
    }
}
