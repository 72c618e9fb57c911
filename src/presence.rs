//! Every look at the world has three answers, not two: a thing is there, it is gone, or the look
//! could not tell. Only a proven absence — the kernel's own answer (ESRCH for a process group,
//! EADDRNOTAVAIL for an address), systemd's own answer about a unit read with its exit status —
//! lets the guard release its key or the agent report a step-down done. "Cannot tell" (a
//! `systemctl` that could not reach systemd, a /proc that could not be read, EPERM from an LSM)
//! keeps an orderly step-down renewing, lets a fenced lease run out, and makes demote say what
//! it could not prove. Grep for `Presence::CannotTell` to see every place that can answer it.

/// What a look at one thing of the world found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// It is there (or may act: a unit activating, deactivating, reloading).
    Present,
    /// Proven gone, by the kernel's or systemd's own answer.
    Absent,
    /// The look failed or its answer cannot be read: never taken for gone. Says why.
    CannotTell(String),
}

impl Presence {
    /// Only a proven absence is absence.
    pub fn is_absent(&self) -> bool {
        matches!(self, Presence::Absent)
    }

    /// Anything short of a proven absence.
    pub fn may_be_present(&self) -> bool {
        !self.is_absent()
    }

    /// The look's own words when it could not tell.
    pub fn doubt(&self) -> Option<&str> {
        match self {
            Presence::CannotTell(why) => Some(why),
            _ => None,
        }
    }
}

impl std::fmt::Display for Presence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Presence::Present => write!(f, "present"),
            Presence::Absent => write!(f, "absent"),
            Presence::CannotTell(why) => write!(f, "cannot tell ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Presence;

    #[test]
    fn only_a_proven_absence_is_absence() {
        assert!(Presence::Absent.is_absent());
        assert!(Presence::Present.may_be_present());
        let doubt = Presence::CannotTell("Failed to connect to bus".into());
        assert!(doubt.may_be_present() && !doubt.is_absent());
        assert_eq!(doubt.doubt(), Some("Failed to connect to bus"));
        assert_eq!(doubt.to_string(), "cannot tell (Failed to connect to bus)");
    }
}
