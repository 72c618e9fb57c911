//! The actions an OCF agent can be asked to perform, by their spec names.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
    Monitor,
    Promote,
    Demote,
    Notify,
    /// OCF 1.1: only parameters marked reloadable changed; take them without a restart.
    ReloadAgent,
    MetaData,
    ValidateAll,
    Usage,
}

impl Action {
    /// `status` is the pre-OCF spelling of monitor that some tools still send.
    pub fn parse(name: &str) -> Option<Action> {
        Some(match name {
            "start" => Action::Start,
            "stop" => Action::Stop,
            "monitor" | "status" => Action::Monitor,
            "promote" => Action::Promote,
            "demote" => Action::Demote,
            "notify" => Action::Notify,
            "reload-agent" => Action::ReloadAgent,
            "meta-data" | "meta_data" => Action::MetaData,
            "validate-all" => Action::ValidateAll,
            "usage" | "help" => Action::Usage,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Monitor => "monitor",
            Action::Promote => "promote",
            Action::Demote => "demote",
            Action::Notify => "notify",
            Action::ReloadAgent => "reload-agent",
            Action::MetaData => "meta-data",
            Action::ValidateAll => "validate-all",
            Action::Usage => "usage",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_names_parse_and_unknown_names_do_not() {
        for a in [
            Action::Start,
            Action::Stop,
            Action::Monitor,
            Action::Promote,
            Action::Demote,
            Action::Notify,
            Action::ReloadAgent,
            Action::MetaData,
            Action::ValidateAll,
            Action::Usage,
        ] {
            assert_eq!(Action::parse(a.name()), Some(a));
        }
        assert_eq!(Action::parse("status"), Some(Action::Monitor));
        assert_eq!(Action::parse("reload"), None);
        assert_eq!(Action::parse(""), None);
    }
}
