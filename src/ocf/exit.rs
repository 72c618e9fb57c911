//! OCF exit codes as a type. Owns the numeric values and nothing else.

use std::fmt;

/// An OCF 1.1 exit code. The numeric values are fixed by the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OcfExit {
    Success,
    ErrGeneric,
    ErrArgs,
    ErrUnimplemented,
    ErrPerm,
    ErrInstalled,
    ErrConfigured,
    NotRunning,
    RunningPromoted,
    FailedPromoted,
    Degraded,
    DegradedPromoted,
}

impl OcfExit {
    pub const fn code(self) -> i32 {
        match self {
            OcfExit::Success => 0,
            OcfExit::ErrGeneric => 1,
            OcfExit::ErrArgs => 2,
            OcfExit::ErrUnimplemented => 3,
            OcfExit::ErrPerm => 4,
            OcfExit::ErrInstalled => 5,
            OcfExit::ErrConfigured => 6,
            OcfExit::NotRunning => 7,
            OcfExit::RunningPromoted => 8,
            OcfExit::FailedPromoted => 9,
            OcfExit::Degraded => 190,
            OcfExit::DegradedPromoted => 191,
        }
    }

    pub fn from_code(code: i32) -> Option<OcfExit> {
        ALL.iter().copied().find(|e| e.code() == code)
    }

    pub const fn name(self) -> &'static str {
        match self {
            OcfExit::Success => "OCF_SUCCESS",
            OcfExit::ErrGeneric => "OCF_ERR_GENERIC",
            OcfExit::ErrArgs => "OCF_ERR_ARGS",
            OcfExit::ErrUnimplemented => "OCF_ERR_UNIMPLEMENTED",
            OcfExit::ErrPerm => "OCF_ERR_PERM",
            OcfExit::ErrInstalled => "OCF_ERR_INSTALLED",
            OcfExit::ErrConfigured => "OCF_ERR_CONFIGURED",
            OcfExit::NotRunning => "OCF_NOT_RUNNING",
            OcfExit::RunningPromoted => "OCF_RUNNING_PROMOTED",
            OcfExit::FailedPromoted => "OCF_FAILED_PROMOTED",
            OcfExit::Degraded => "OCF_DEGRADED",
            OcfExit::DegradedPromoted => "OCF_DEGRADED_PROMOTED",
        }
    }
}

const ALL: [OcfExit; 12] = [
    OcfExit::Success,
    OcfExit::ErrGeneric,
    OcfExit::ErrArgs,
    OcfExit::ErrUnimplemented,
    OcfExit::ErrPerm,
    OcfExit::ErrInstalled,
    OcfExit::ErrConfigured,
    OcfExit::NotRunning,
    OcfExit::RunningPromoted,
    OcfExit::FailedPromoted,
    OcfExit::Degraded,
    OcfExit::DegradedPromoted,
];

impl fmt::Display for OcfExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_ocf_spec_and_round_trip() {
        let expected = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 190, 191];
        let got: Vec<i32> = ALL.iter().map(|e| e.code()).collect();
        assert_eq!(got, expected);
        for e in ALL {
            assert_eq!(OcfExit::from_code(e.code()), Some(e));
        }
        assert_eq!(OcfExit::from_code(10), None);
    }
}
