//! What each answer of the outside world means to the guard machine: pure functions from the
//! result of one piece of I/O to the machine's input. The tokio shell (guard::lead,
//! guard::keepalive, guard::wire) and the fault-schedule simulation (guard::sim) both go
//! through them — the shell with real etcd, netlink and systemctl, the simulation with fakes at
//! the same boundary — so no decision about an answer lives in one of them only. No I/O here.

use std::time::Duration;

use super::machine::{Fault, Input};
use crate::failsafe::witness::Cluster;
use crate::failsafe::OwnView;
use crate::lease::etcd::KeyEvent;
use crate::lease::{LeaseError, LeaseId, RenewError};
use crate::service::ServiceRef;
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
