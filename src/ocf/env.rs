//! The environment Pacemaker hands an agent: `OCF_RESKEY_*` parameters, `CRM_meta_*`
//! operation attributes, the resource instance and the check level. Pure parsing; it reads
//! nothing but the variables it is given.

use std::collections::BTreeMap;

const RESKEY: &str = "OCF_RESKEY_";
const META: &str = "CRM_meta_";

/// What one agent invocation was told by its caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OcfEnv {
    /// `OCF_RESOURCE_INSTANCE`, as given (clones carry a `:N` suffix).
    pub instance: Option<String>,
    /// Resource parameters, `OCF_RESKEY_` stripped. Empty values count as unset, as in
    /// resource-agents' shell agents.
    pub params: BTreeMap<String, String>,
    /// `CRM_meta_*` attributes, prefix stripped (`interval`, `timeout`, `on_node`, ...).
    pub meta: BTreeMap<String, String>,
    /// `OCF_CHECK_LEVEL` (0, 10 or 20); anything unparsable counts as 0.
    pub check_level: u32,
    /// `OCF_EXIT_REASON_PREFIX`, or the spec's default.
    pub exit_reason_prefix: String,
}

impl OcfEnv {
    pub fn from_process() -> OcfEnv {
        // std::env::vars() panics on a variable that is not UTF-8 (`env $'X=\xff' …`). A
        // name that is not UTF-8 is none of ours; a value that is not becomes U+FFFD and is
        // refused by the parameter's own check, which names it.
        OcfEnv::from_vars(
            std::env::vars_os().filter_map(|(k, v)| {
                Some((k.into_string().ok()?, v.to_string_lossy().into_owned()))
            }),
        )
    }

    pub fn from_vars<I, K, V>(vars: I) -> OcfEnv
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        let mut env = OcfEnv {
            exit_reason_prefix: super::reason::DEFAULT_PREFIX.to_string(),
            ..OcfEnv::default()
        };
        let mut check_level: Option<u32> = None;
        for (key, value) in vars {
            let key = key.as_ref();
            let value: String = value.into();
            if let Some(name) = key.strip_prefix(RESKEY) {
                if let Some(meta) = name.strip_prefix(META) {
                    env.meta.insert(meta.to_string(), value);
                } else if !value.is_empty() {
                    env.params.insert(name.to_string(), value);
                }
            } else {
                match key {
                    "OCF_RESOURCE_INSTANCE" if !value.is_empty() => env.instance = Some(value),
                    "OCF_CHECK_LEVEL" => check_level = Some(value.trim().parse().unwrap_or(0)),
                    "OCF_EXIT_REASON_PREFIX" => env.exit_reason_prefix = value,
                    _ => {}
                }
            }
        }
        // Pacemaker before 2.0.5 exports the level only as OCF_RESKEY_OCF_CHECK_LEVEL; like
        // resource-agents, take it from there when OCF_CHECK_LEVEL is absent. Not a parameter.
        let legacy = env.params.remove("OCF_CHECK_LEVEL");
        env.check_level = check_level
            .or_else(|| legacy.map(|v| v.trim().parse().unwrap_or(0)))
            .unwrap_or(0);
        env
    }

    /// The operation's recurring interval in milliseconds; absent means 0.
    pub fn interval_ms(&self) -> u64 {
        self.meta_ms("interval").unwrap_or(0)
    }

    /// The operation's timeout in milliseconds, when the caller gave one.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.meta_ms("timeout")
    }

    /// A probe is a monitor without an interval: Pacemaker asks "is it running here?" and
    /// must get 7 on a clean host, never a configuration error.
    pub fn is_probe(&self) -> bool {
        self.interval_ms() == 0
    }

    /// The resource name without a clone suffix (`api:1` → `api`).
    pub fn resource(&self) -> Option<&str> {
        self.instance
            .as_deref()
            .map(|i| i.split_once(':').map_or(i, |(name, _)| name))
    }

    fn meta_ms(&self, name: &str) -> Option<u64> {
        self.meta.get(name).and_then(|v| v.trim().parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> OcfEnv {
        OcfEnv::from_vars(vars.iter().map(|(k, v)| (*k, v.to_string())))
    }

    #[test]
    fn reskeys_are_split_into_params_and_meta() {
        let e = env(&[
            ("OCF_RESKEY_ip", "192.0.2.10"),
            ("OCF_RESKEY_nic", ""),
            ("OCF_RESKEY_CRM_meta_interval", "10000"),
            ("OCF_RESKEY_CRM_meta_timeout", "20000"),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(e.params.get("ip").map(String::as_str), Some("192.0.2.10"));
        assert!(!e.params.contains_key("nic"), "empty values count as unset");
        assert_eq!(e.interval_ms(), 10000);
        assert_eq!(e.timeout_ms(), Some(20000));
        assert!(!e.is_probe());
    }

    #[test]
    fn probe_is_a_monitor_without_interval_or_with_zero() {
        assert!(env(&[]).is_probe());
        assert!(env(&[("OCF_RESKEY_CRM_meta_interval", "0")]).is_probe());
        assert_eq!(env(&[]).timeout_ms(), None);
    }

    #[test]
    fn resource_drops_the_clone_suffix_and_check_level_parses() {
        let e = env(&[
            ("OCF_RESOURCE_INSTANCE", "api:2"),
            ("OCF_CHECK_LEVEL", "20"),
        ]);
        assert_eq!(e.resource(), Some("api"));
        assert_eq!(e.instance.as_deref(), Some("api:2"));
        assert_eq!(e.check_level, 20);
        assert_eq!(env(&[("OCF_CHECK_LEVEL", "x")]).check_level, 0);
    }

    #[test]
    fn the_check_level_of_pacemaker_before_2_0_5_is_honoured() {
        let old = env(&[("OCF_RESKEY_OCF_CHECK_LEVEL", "20")]);
        assert_eq!(old.check_level, 20);
        assert!(old.params.is_empty(), "not a parameter of ours");
        let both = env(&[
            ("OCF_RESKEY_OCF_CHECK_LEVEL", "20"),
            ("OCF_CHECK_LEVEL", "10"),
        ]);
        assert_eq!(both.check_level, 10, "OCF_CHECK_LEVEL wins");
    }

    #[test]
    fn exit_reason_prefix_defaults_and_can_be_overridden() {
        assert_eq!(env(&[]).exit_reason_prefix, "ocf-exit-reason:");
        let e = env(&[("OCF_EXIT_REASON_PREFIX", "why:")]);
        assert_eq!(e.exit_reason_prefix, "why:");
    }
}
