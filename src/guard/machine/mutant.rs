//! The seam the mutation tests (guard::sim::mutants) reach the machine through: in a test
//! build it holds which rule is off (crate::rules) and what two of the mistakes need — the
//! time the input being handled came in (Rule::OwnTime off: every effect timed by it) and a
//! loss heard while raising (Rule::LossFencesTheRaise off: applied after the raise); in a
//! production build it is empty, every rule holds, and each of its calls compiles away.

use std::time::Duration;

use super::types::Cause;
use crate::rules::{Rule, Rules};

#[derive(Debug, Clone, Default)]
pub struct Mutant {
    /// Which rule is off (none in production).
    pub rules: Rules,
    #[cfg(test)]
    handled_at: Duration,
    #[cfg(test)]
    queued_loss: Option<Cause>,
}

impl Mutant {
    #[inline(always)]
    pub fn holds(&self, rule: Rule) -> bool {
        self.rules.holds(rule)
    }

    /// An input came in at `now`.
    #[inline(always)]
    pub(super) fn input_at(&mut self, _now: Duration) {
        #[cfg(test)]
        {
            self.handled_at = _now;
        }
    }

    /// Rule::OwnTime off: the clock every effect is timed by (the input's time).
    #[inline(always)]
    pub(super) fn stale_clock(&self) -> Option<Duration> {
        #[cfg(test)]
        if !self.holds(Rule::OwnTime) {
            return Some(self.handled_at);
        }
        None
    }

    /// A loss heard at this point: Some(cause) to apply it now; None when Rule::LossFencesTheRaise
    /// is off and it is queued until the raise is over.
    #[inline(always)]
    pub(super) fn loss(&mut self, _raising: bool, cause: Cause) -> Option<Cause> {
        #[cfg(test)]
        if _raising && !self.holds(Rule::LossFencesTheRaise) {
            self.queued_loss = Some(cause);
            return None;
        }
        Some(cause)
    }

    /// The loss queued while raising, once the raise is over.
    #[inline(always)]
    pub(super) fn queued_loss(&mut self, _raising: bool) -> Option<Cause> {
        #[cfg(test)]
        if !_raising {
            return self.queued_loss.take();
        }
        None
    }
}
