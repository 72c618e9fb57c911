//! The one definition of every agent parameter: name, type, default, integer range, unit,
//! descriptions, required, unique and reloadable flags. OCF environment parsing, TOML configs, meta-data XML and the reference
//! in docs/ all derive from these tables; nothing else may describe a parameter.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::ocf::OcfEnv;

/// The value types ra-api-1.dtd knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Integer,
    Boolean,
}

impl Kind {
    pub const fn dtd_name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Integer => "integer",
            Kind::Boolean => "boolean",
        }
    }
}

/// What an integer parameter that is a duration counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Milliseconds,
}

impl Unit {
    pub const fn symbol(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Milliseconds => "ms",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Option<&'static str>,
    pub required: bool,
    pub unique: bool,
    /// A change needs no restart: Pacemaker 2.1+ calls reload-agent for it (OCF 1.1), and a
    /// running guard takes the new value at once (see `MasterConfig::reload_refusal`).
    pub reloadable: bool,
    /// For an integer: the values taken (inclusive); `Values::number` checks it.
    pub range: Option<(u64, u64)>,
    /// For a duration: what its number counts (`Values::duration`, `Param::duration_of`).
    pub unit: Option<Unit>,
    pub shortdesc: &'static str,
    pub longdesc: &'static str,
}

impl Param {
    /// `n` of this parameter's unit as a duration (a parameter without one counts seconds;
    /// every duration in the tables names its unit, which a test checks).
    pub fn duration_of(&self, n: u64) -> std::time::Duration {
        match self.unit {
            Some(Unit::Milliseconds) => std::time::Duration::from_millis(n),
            Some(Unit::Seconds) | None => std::time::Duration::from_secs(n),
        }
    }
}

/// A parameter whose value could not be used. Displayed, it names the parameter and the value,
/// which is what an administrator needs in the `ocf-exit-reason:` line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("required parameter {param} is not set")]
    Missing { param: &'static str },
    #[error("parameter {param}=\"{value}\" {problem}")]
    Invalid {
        param: &'static str,
        value: String,
        problem: String,
    },
    #[error("unknown parameter {name} (known: {known})")]
    Unknown { name: String, known: String },
    #[error("config file: {0}")]
    Syntax(String),
}

impl ConfigError {
    pub fn invalid(param: &Param, value: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            param: param.name,
            value: value.to_string(),
            problem: problem.into(),
        }
    }
}

/// Raw parameter values for one agent, checked against its table of parameters.
#[derive(Debug, Clone)]
pub struct Values {
    specs: &'static [Param],
    raw: BTreeMap<String, String>,
}

impl Values {
    /// For unit tests: the values Pacemaker would pass as `OCF_RESKEY_{name}={value}`.
    #[cfg(test)]
    pub fn from_reskeys(specs: &'static [Param], vars: &[(&str, &str)]) -> Values {
        let env = OcfEnv::from_vars(
            vars.iter()
                .map(|(k, v)| (format!("OCF_RESKEY_{k}"), v.to_string())),
        );
        Values::from_ocf(specs, &env)
    }

    /// From Pacemaker's environment. Unknown `OCF_RESKEY_*` are ignored, as every OCF agent
    /// does: Pacemaker itself rejects unknown names when the resource is configured.
    pub fn from_ocf(specs: &'static [Param], env: &OcfEnv) -> Values {
        let raw = env
            .params
            .iter()
            .filter(|(k, _)| specs.iter().any(|p| p.name == k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Values { specs, raw }
    }

    /// From a resource's instance attributes in the CIB (name, value). As with `from_ocf`,
    /// names the agent does not know are ignored: Pacemaker validated them when the resource
    /// was configured.
    pub fn from_cib(specs: &'static [Param], pairs: Vec<(String, String)>) -> Values {
        let raw = pairs
            .into_iter()
            .filter(|(k, _)| specs.iter().any(|p| p.name == k.as_str()))
            .collect();
        Values { specs, raw }
    }

    /// From a TOML document of `name = value` pairs. Unknown names are rejected: in a file a
    /// person wrote, an unknown key is a typo that would otherwise be silently ignored.
    pub fn from_toml(specs: &'static [Param], text: &str) -> Result<Values, ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax(e.message().to_string()))?;
        let mut raw = BTreeMap::new();
        for (key, value) in table {
            let Some(spec) = specs.iter().find(|p| p.name == key) else {
                let known: Vec<&str> = specs.iter().map(|p| p.name).collect();
                return Err(ConfigError::Unknown {
                    name: key,
                    known: known.join(", "),
                });
            };
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Array(items) => {
                    let mut parts = Vec::new();
                    for item in items {
                        match item {
                            toml::Value::String(s) => parts.push(s),
                            other => parts.push(other.to_string()),
                        }
                    }
                    parts.join(",")
                }
                other => {
                    return Err(ConfigError::invalid(
                        spec,
                        &other.to_string(),
                        "has an unsupported type",
                    ))
                }
            };
            if !text.is_empty() {
                raw.insert(key, text);
            }
        }
        Ok(Values { specs, raw })
    }

    /// The value as given, or the parameter's default.
    pub fn get(&self, p: &Param) -> Option<&str> {
        debug_assert!(
            self.specs.iter().any(|s| s.name == p.name),
            "{} not in table",
            p.name
        );
        self.raw.get(p.name).map(String::as_str).or(p.default)
    }

    /// Whether `p` is one of this agent's parameters.
    pub fn knows(&self, p: &Param) -> bool {
        self.specs.iter().any(|s| s.name == p.name)
    }

    /// The value, or the default, for a parameter this agent may not have (None if not).
    pub fn get_if_known(&self, p: &Param) -> Option<&str> {
        if self.knows(p) {
            self.get(p)
        } else {
            None
        }
    }

    /// Whether the caller set the parameter explicitly (defaults do not count).
    pub fn is_set(&self, p: &Param) -> bool {
        self.raw.contains_key(p.name)
    }

    pub fn required(&self, p: &Param) -> Result<&str, ConfigError> {
        self.get(p).ok_or(ConfigError::Missing { param: p.name })
    }

    pub fn integer<T: FromStr>(&self, p: &Param) -> Result<Option<T>, ConfigError> {
        match self.get(p) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| ConfigError::invalid(p, v, "is not a non-negative integer")),
        }
    }

    /// An integer parameter's value, or its default, within the table's range: what every
    /// integer with a default reads (the table is the one place of both).
    pub fn number<T: TryFrom<u64>>(&self, p: &Param) -> Result<T, ConfigError> {
        let v = self
            .integer::<u64>(p)?
            .ok_or(ConfigError::Missing { param: p.name })?;
        let (lo, hi) = p.range.unwrap_or((0, u64::MAX));
        if !(lo..=hi).contains(&v) {
            return Err(ConfigError::invalid(
                p,
                self.get(p).unwrap_or_default(),
                format!("is out of range {lo}..{hi}"),
            ));
        }
        T::try_from(v)
            .map_err(|_| ConfigError::invalid(p, self.get(p).unwrap_or_default(), "is too large"))
    }

    /// A duration parameter's value (or default, within range) in its unit.
    pub fn duration(&self, p: &Param) -> Result<std::time::Duration, ConfigError> {
        Ok(p.duration_of(self.number::<u64>(p)?))
    }

    pub fn boolean(&self, p: &Param) -> Result<bool, ConfigError> {
        match self.get(p) {
            None => Ok(false),
            Some(v) => parse_bool(v).ok_or_else(|| {
                ConfigError::invalid(p, v, "is not a boolean (true/false, yes/no, 1/0, on/off)")
            }),
        }
    }
}

pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" | "ja" => Some(true),
        "0" | "false" | "no" | "off" | "n" | "nein" => Some(false),
        _ => None,
    }
}

pub mod master;
pub mod vip;

impl crate::ocf::failure::Failure for ConfigError {
    fn exit(&self) -> crate::ocf::OcfExit {
        crate::ocf::OcfExit::ErrConfigured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Param = Param {
        name: "a",
        kind: Kind::Integer,
        default: Some("5"),
        required: false,
        unique: false,
        reloadable: false,
        range: None,
        unit: None,
        shortdesc: "a",
        longdesc: "a",
    };
    const B: Param = Param {
        name: "b",
        kind: Kind::Boolean,
        default: None,
        ..A
    };
    const S: Param = Param {
        name: "s",
        kind: Kind::String,
        default: None,
        required: true,
        ..A
    };
    static TABLE: [Param; 3] = [A, B, S];

    fn ocf(vars: &[(&str, &str)]) -> Values {
        Values::from_reskeys(&TABLE, vars)
    }

    #[test]
    fn defaults_apply_when_unset_and_explicit_values_win() {
        assert_eq!(ocf(&[]).integer::<u32>(&A), Ok(Some(5)));
        assert_eq!(ocf(&[("a", "7")]).integer::<u32>(&A), Ok(Some(7)));
        assert!(!ocf(&[]).is_set(&A));
    }

    #[test]
    fn bad_integer_names_parameter_and_value() {
        let err = ocf(&[("a", "five")]).integer::<u32>(&A).unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameter a=\"five\" is not a non-negative integer"
        );
        // The table's default and range: what `number` reads.
        const R: Param = Param {
            range: Some((1, 10)),
            ..A
        };
        static RANGED: [Param; 1] = [R];
        let values = |vars: &[(&str, &str)]| Values::from_reskeys(&RANGED, vars);
        assert_eq!(values(&[]).number::<u32>(&R), Ok(5));
        assert_eq!(values(&[("a", "10")]).number::<u8>(&R), Ok(10));
        let err = values(&[("a", "70")]).number::<u32>(&R).unwrap_err();
        assert_eq!(err.to_string(), "parameter a=\"70\" is out of range 1..10");
        let err = values(&[("a", "0")]).number::<u32>(&R).unwrap_err();
        assert_eq!(err.to_string(), "parameter a=\"0\" is out of range 1..10");
    }

    #[test]
    fn booleans_follow_ocf_is_true() {
        assert_eq!(ocf(&[("b", "yes")]).boolean(&B), Ok(true));
        assert_eq!(ocf(&[("b", "OFF")]).boolean(&B), Ok(false));
        assert_eq!(ocf(&[]).boolean(&B), Ok(false));
        assert!(ocf(&[("b", "maybe")])
            .boolean(&B)
            .unwrap_err()
            .to_string()
            .contains("b=\"maybe\""));
    }

    #[test]
    fn missing_required_parameter_is_named() {
        assert_eq!(
            ocf(&[]).required(&S).unwrap_err().to_string(),
            "required parameter s is not set"
        );
    }

    #[test]
    fn toml_rejects_unknown_keys_and_converts_scalars() {
        let v = Values::from_toml(&TABLE, "a = 3\nb = true\ns = \"x\"").unwrap();
        assert_eq!(v.integer::<u32>(&A), Ok(Some(3)));
        assert_eq!(v.boolean(&B), Ok(true));
        assert_eq!(v.required(&S), Ok("x"));
        let err = Values::from_toml(&TABLE, "typo = 1").unwrap_err();
        assert!(
            err.to_string().starts_with("unknown parameter typo"),
            "{err}"
        );
        assert!(matches!(
            Values::from_toml(&TABLE, "a = "),
            Err(ConfigError::Syntax(_))
        ));
    }

    #[test]
    fn every_duration_in_the_tables_names_its_unit() {
        for table in [&vip::VIP_AGENT[..], &master::MASTER_AGENT[..]] {
            for p in table {
                let duration = ["_ttl", "_margin", "_interval", "_timeout"]
                    .iter()
                    .any(|end| p.name.ends_with(end));
                assert_eq!(
                    p.unit.is_some(),
                    duration && p.kind == Kind::Integer,
                    "{}: a duration names its unit, nothing else has one",
                    p.name
                );
            }
        }
        assert_eq!(
            master::HEALTH_TIMEOUT.duration_of(2000),
            std::time::Duration::from_secs(2)
        );
        assert_eq!(
            master::LEASE_TTL.duration_of(10),
            std::time::Duration::from_secs(10)
        );
    }
}
