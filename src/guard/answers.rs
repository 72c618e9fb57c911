//! What each answer of the outside world means to the guard machine: pure functions from the
//! result of one piece of I/O to the machine's input. The tokio shell (guard::lead,
//! guard::keepalive, guard::wire) and the fault-schedule simulation (guard::sim) both go
//! through them — the shell with real etcd, netlink and systemctl, the simulation with fakes at
//! the same boundary — so no decision about an answer lives in one of them only. Every input
//! the machine takes from the shell is made here (Input::Tick alone is guard::fence's).
//! No I/O here.

use std::net::IpAddr;
use std::time::Duration;

use super::machine::{
    Claim, Fault, Gone, HealthReport, Input, Regrant, RetakeError, DEFAULT_STEP_DOWN,
};
use crate::failsafe::witness::Cluster;
use crate::failsafe::OwnView;
use crate::lease::etcd::KeyEvent;
use crate::lease::{LeaseError, LeaseId, RenewError};
use crate::presence::Presence;
use crate::service::ServiceRef;
use crate::vip::netlink::Link;
use crate::vip::VipError;

/// A keepalive sent at `sent` (boot clock) and what came of it: a TTL (zero: the lease is
/// gone), etcd saying the lease does not exist (as final as a TTL of 0), or no renewal now.
pub fn renewal(lease: LeaseId, sent: Duration, result: &Result<Duration, RenewError>) -> Input {
    match result {
        Ok(ttl) => Input::Renewed { sent, ttl: *ttl },
        Err(RenewError::LeaseNotFound(_)) => Input::LeaseGone { sent },
        Err(e) => Input::RenewFailed {
            sent,
            why: format!("lease {lease}: {e}"),
        },
    }
}

/// The confirm after a renewal: whether the key still carries our lease, and (when it does not)
/// which lease it carries now, if that could be read. Only etcd's own "no" is a loss; a
/// confirm that failed says nothing (the watch and the next renewal look again).
pub fn confirm(still_ours: &Result<bool, LeaseError>, holder: Option<LeaseId>) -> Option<Input> {
    match still_ours {
        Ok(false) => Some(Input::KeyLost(holder.map(|l| l.0))),
        Ok(true) | Err(_) => None,
    }
}

/// What the key's watch saw, for a guard holding `lease`: its deletion, or a put under another
/// lease, is a loss; a put under ours is nothing.
pub fn watched(lease: LeaseId, event: &KeyEvent) -> Option<Input> {
    match event {
        KeyEvent::Deleted => Some(Input::KeyLost(None)),
        KeyEvent::Put { lease: other } if *other != lease => Some(Input::KeyLost(Some(other.0))),
        KeyEvent::Put { .. } => None,
    }
}

/// The key read when a watch is (re)started: gone or another's is a loss, ours is a watch from
/// the read's revision on; an error is nothing yet (read again).
pub fn read_before_watch(
    lease: LeaseId,
    holder: Result<Option<LeaseId>, &LeaseError>,
) -> Option<Input> {
    match holder {
        Ok(None) => Some(Input::KeyLost(None)),
        Ok(Some(h)) if h != lease => Some(Input::KeyLost(Some(h.0))),
        Ok(Some(_)) | Err(_) => None,
    }
}

/// The release (delete the key while it carries our lease, revoke the lease), within `limit`:
/// None when it did not answer in time.
pub fn released(result: Option<Result<bool, LeaseError>>, limit: Duration) -> Input {
    Input::Released(match result {
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(Fault::Etcd(e.to_string())),
        None => Err(Fault::Etcd(format!(
            "no answer within {} ms",
            limit.as_millis()
        ))),
    })
}

/// The service's start: how the machine addresses it from now on, or why it did not start.
pub fn started(result: Result<ServiceRef, String>) -> Input {
    Input::ServiceStarted(result.map_err(Fault::Service))
}

/// The VIPs settled (link, DAD, announcements), or the first that did not: the raise fails.
pub fn settled(result: &Result<(), VipError>) -> Input {
    Input::Settled(match result {
        Ok(()) => Ok(()),
        Err(e) => Err(Fault::Settle(e.to_string())),
    })
}

/// demote_command's end: it confirmed (exit status 0), or why not (its exit, or its kill at
/// the budget's end).
pub fn taken_back(result: Result<(), String>) -> Input {
    Input::TakenBack(result.map_err(Fault::Service))
}

/// The service's leader exited (a command the guard supervises), in the words of its exit.
pub fn service_exited(detail: String) -> Input {
    Input::ServiceExited(detail)
}

/// A look at the stopped (or stopping) service: present, absent, or "cannot tell" (a
/// `systemctl` that could not reach systemd), which proves nothing.
pub fn service_checked(look: Presence) -> Input {
    Input::ServiceChecked(look)
}

/// The fencing token written for the service (HAMASTER_FENCING_TOKEN), or why not.
pub fn token_written(result: Result<(), Fault>) -> Input {
    Input::TokenWritten(result)
}

/// The health watch's verdict, told when it changed.
pub fn health(report: HealthReport) -> Input {
    Input::Health(report)
}

/// A health probe that cannot be made (a bad URL, an unreadable CA): unhealthy, in its words.
pub fn probe_unusable(why: &str, unit_active: bool) -> Input {
    Input::Health(HealthReport {
        healthy: false,
        detail: format!("health probe unusable: {why}"),
        unit_inactive: !unit_active,
    })
}

/// An orderly step-down asked at `now` (the agent's demote or stop, a signal, a campaign's
/// verdict), within `budget`; none given: DEFAULT_STEP_DOWN.
pub fn step_down(now: Duration, budget: Option<Duration>) -> Input {
    Input::StepDown {
        by: now + budget.unwrap_or(DEFAULT_STEP_DOWN),
    }
}

/// The key taken back after a hold, under a new lease sent at `sent` with `ttl`, or why not.
pub fn retaken(result: Result<Regrant, RetakeError>) -> Input {
    Input::Retaken(result)
}

/// The VIP's interface as the wire watch read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSeen {
    Removed,
    /// Administratively down (an IPv4 address stays on it, unusable).
    Down,
    Up,
}

impl LinkSeen {
    /// A link read by index: None when there is no such interface any more.
    pub fn of(link: Option<&Link>) -> LinkSeen {
        match link {
            None => LinkSeen::Removed,
            Some(l) if !l.admin_up => LinkSeen::Down,
            Some(_) => LinkSeen::Up,
        }
    }
}

/// The VIP's interface removed or set down is a loss of the VIP (`with_address`: its address
/// went too); up, nothing.
pub fn link(nic: &str, seen: LinkSeen, with_address: bool) -> Option<Input> {
    let detail = match seen {
        LinkSeen::Removed => format!("interface {nic} was removed"),
        LinkSeen::Down => format!("link {nic} was set down"),
        LinkSeen::Up => return None,
    };
    let how = match with_address {
        true => Gone::Deleted { with_link: true },
        false => Gone::LinkDown,
    };
    Some(Input::VipGone { how, detail })
}

/// The kernel's event: the VIP deleted from its interface. With the interface read right
/// after (None: it could not be read), a deletion that went with the link is the link's loss;
/// otherwise another program deleted it (or the kernel at the lifetime's end: the machine
/// tells the two apart by the lifetime it gave).
pub fn address_deleted(ip: IpAddr, nic: &str, seen: Option<LinkSeen>) -> Input {
    seen.and_then(|s| link(nic, s, true))
        .unwrap_or_else(|| Input::VipGone {
            how: Gone::Deleted { with_link: false },
            detail: format!("VIP {ip} was deleted from {nic} by another program"),
        })
}

/// A look at the interface and the address, when events were dropped or the watch begins:
/// only a proven absence is a loss; a dump that failed ("cannot tell") keeps what was known.
pub fn looked(ip: IpAddr, nic: &str, seen: LinkSeen, present: &Presence) -> Option<Input> {
    let gone = present.is_absent();
    link(nic, seen, gone).or_else(|| {
        gone.then(|| Input::VipGone {
            how: Gone::Deleted { with_link: false },
            detail: format!("VIP {ip} is no longer on {nic} (deleted by another program)"),
        })
    })
}

/// A frame from a MAC of none of this node's interfaces claiming the VIP: a conflict, told to
/// the machine with `push` (conflict_action=push), which counts it and decides the defence.
pub fn claimed(ip: IpAddr, nic: &str, mac: String, frame: &str, push: bool) -> Input {
    let what = format!("VIP conflict: {ip} claimed by {mac} on {nic} ({frame})");
    Input::VipClaimed(Claim {
        address: ip.to_string(),
        mac,
        frame: frame.into(),
        what,
        push,
    })
}

/// One ask of corosync and Pacemaker, made at `asked`: corosync's membership (or why none),
/// Pacemaker's view of this node (None: that ask did not come back, so it says nothing:
/// "cannot tell"), and the RTC as read when the ask began (a pause shows between two asks).
pub fn membership(
    asked: Duration,
    rtc: Option<u64>,
    seen: Result<Cluster, String>,
    pacemaker: Option<OwnView>,
) -> Input {
    Input::Membership {
        asked,
        seen,
        pacemaker: OwnView {
            rtc,
            ..pacemaker.unwrap_or_default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_etcds_own_no_is_a_loss() {
        let l = LeaseId(7);
        let sent = Duration::from_secs(3);
        let ok = renewal(l, sent, &Ok(Duration::from_secs(10)));
        assert_eq!(
            ok,
            Input::Renewed {
                sent,
                ttl: Duration::from_secs(10)
            }
        );
        let gone = renewal(l, sent, &Err(RenewError::LeaseNotFound("m1".into())));
        assert_eq!(gone, Input::LeaseGone { sent });
        let silent = renewal(l, sent, &Err(RenewError::TimedOut("m1: no answer".into())));
        assert!(matches!(silent, Input::RenewFailed { .. }));
        let down = Err(LeaseError::Etcd {
            op: "confirm",
            detail: "no leader".into(),
        });
        assert_eq!(confirm(&down, None), None);
        assert_eq!(confirm(&Ok(true), None), None);
        assert_eq!(
            confirm(&Ok(false), Some(LeaseId(9))),
            Some(Input::KeyLost(Some(9)))
        );
        assert_eq!(watched(l, &KeyEvent::Put { lease: l }), None);
        assert_eq!(watched(l, &KeyEvent::Deleted), Some(Input::KeyLost(None)));
        assert_eq!(read_before_watch(l, Ok(Some(l))), None);
        assert_eq!(read_before_watch(l, Ok(None)), Some(Input::KeyLost(None)));
        assert_eq!(
            released(None, Duration::from_millis(1500)),
            Input::Released(Err(Fault::Etcd("no answer within 1500 ms".into())))
        );
    }

    #[test]
    fn an_ask_whose_pacemaker_half_did_not_come_back_says_nothing_of_it_but_keeps_the_rtc() {
        let asked = Duration::from_secs(40);
        let no_corosync = Err("corosync did not answer".to_string());
        let Input::Membership { pacemaker, .. } = membership(asked, Some(1_700), no_corosync, None)
        else {
            panic!("a membership answer");
        };
        assert_eq!(
            (pacemaker.fencing, pacemaker.online),
            (None, None),
            "cannot tell"
        );
        assert_eq!(pacemaker.rtc, Some(1_700), "read as the ask began");
        let told = OwnView {
            online: Some(true),
            rtc: Some(5),
            ..OwnView::default()
        };
        let Input::Membership { pacemaker, .. } =
            membership(asked, Some(1_701), Err(String::new()), Some(told))
        else {
            panic!("a membership answer");
        };
        assert_eq!(pacemaker.online, Some(true));
        assert_eq!(
            pacemaker.rtc,
            Some(1_701),
            "the ask's own reading, not the view's"
        );
        assert_eq!(
            taken_back(Err("exit status 1".into())),
            Input::TakenBack(Err(Fault::Service("exit status 1".into())))
        );
    }
}
