//! etcd connection settings from the parameter table: endpoints, TLS files, lease timing.

use std::path::PathBuf;
use std::time::Duration;

use super::LeaseClock;
use crate::params::master as p;
use crate::params::{ConfigError, Values};

/// lease_ttl's range, the parameter table's (its lower end is etcd's minimum lease: 1.5 ×
/// election timeout, 2 s by default). A table without one does not compile.
const TTL_RANGE: (u64, u64) = match p::LEASE_TTL.range {
    Some(r) => r,
    None => panic!("lease_ttl has a range in the parameter table"),
};
pub const MIN_TTL_SECS: u64 = TTL_RANGE.0;
const MAX_TTL_SECS: u64 = TTL_RANGE.1;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    /// etcd_prefix as set: the root under which every cluster's keys sit.
    pub prefix: String,
    /// The cluster's name in the leader key (cluster_name, else corosync's); Err: why it is
    /// not known here (no corosync answered). See `scope`.
    pub cluster: Result<String, String>,
    pub tls: bool,
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// etcd authentication: etcd_user and etcd_password_file, both or neither.
    #[serde(default)]
    pub auth: Option<EtcdAuth>,
    pub ttl: Duration,
    pub margin: Duration,
    /// lease_ttl was not set: `ttl` follows the cluster (lease::cluster).
    #[serde(default)]
    pub ttl_from_cluster: bool,
    /// lease_margin was not set: `margin` follows `ttl` (derived_margin).
    #[serde(default)]
    pub margin_derived: bool,
    /// Keep etcd's raft leader off this node while leading (etcd_move_leader).
    pub move_leader: bool,
    /// What an etcd outage does to the master (etcd_outage).
    #[serde(default)]
    pub outage: EtcdOutage,
}

/// etcd_user and the file holding its password (read at each authentication, never kept
/// here).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EtcdAuth {
    pub user: String,
    pub password_file: PathBuf,
}

impl EtcdAuth {
    fn from_values(v: &Values) -> Result<Option<EtcdAuth>, ConfigError> {
        let user = v.get(&p::ETCD_USER).filter(|u| !u.is_empty());
        let file = v.get(&p::ETCD_PASSWORD_FILE).filter(|f| !f.is_empty());
        match (user, file) {
            (None, None) => Ok(None),
            (Some(u), None) => Err(ConfigError::invalid(
                &p::ETCD_USER,
                u,
                "needs etcd_password_file too",
            )),
            (None, Some(f)) => Err(ConfigError::invalid(
                &p::ETCD_PASSWORD_FILE,
                f,
                "needs etcd_user too",
            )),
            (Some(u), Some(_)) if u.contains(char::is_whitespace) => Err(ConfigError::invalid(
                &p::ETCD_USER,
                u,
                "must not contain white space",
            )),
            (Some(_), Some(f)) if !f.starts_with('/') => Err(ConfigError::invalid(
                &p::ETCD_PASSWORD_FILE,
                f,
                "must be an absolute path",
            )),
            (Some(u), Some(f)) => Ok(Some(EtcdAuth {
                user: u.to_string(),
                password_file: PathBuf::from(f),
            })),
        }
    }
}

/// etcd_outage: hold the master through an etcd outage on corosync's proof, or fence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EtcdOutage {
    /// Hold where the cluster has fencing enabled (a holder's takeover is then cleared by its
    /// fencing, at no cost to a failover); fence where it has none.
    #[default]
    Auto,
    Hold,
    Fence,
}

impl EtcdOutage {
    fn from_values(v: &Values) -> Result<EtcdOutage, ConfigError> {
        match v.required(&p::ETCD_OUTAGE)? {
            "auto" => Ok(EtcdOutage::Auto),
            "hold" => Ok(EtcdOutage::Hold),
            "fence" => Ok(EtcdOutage::Fence),
            other => Err(ConfigError::invalid(
                &p::ETCD_OUTAGE,
                other,
                "must be auto, hold or fence",
            )),
        }
    }
}

impl EtcdConfig {
    /// How etcd is reached: the endpoints, the TLS files, the authentication. A reload may
    /// change these (the guard's client reconnects to the same cluster, `Etcd::reconnect`);
    /// not the prefix, the cluster's name or the lease, which make the key.
    pub fn connection(&self) -> (&[String], bool, [&Option<PathBuf>; 3], &Option<EtcdAuth>) {
        (
            &self.endpoints,
            self.tls,
            [&self.cacert, &self.cert, &self.key],
            &self.auth,
        )
    }

    /// This configuration with `other`'s connection (see `connection`).
    pub fn with_connection_of(&self, other: &EtcdConfig) -> EtcdConfig {
        EtcdConfig {
            endpoints: other.endpoints.clone(),
            tls: other.tls,
            cacert: other.cacert.clone(),
            cert: other.cert.clone(),
            key: other.key.clone(),
            auth: other.auth.clone(),
            ..self.clone()
        }
    }

    pub fn from_values(v: &Values) -> Result<EtcdConfig, ConfigError> {
        let raw = v.required(&p::ETCD_ENDPOINTS)?;
        let endpoints: Vec<String> = raw
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect();
        if endpoints.is_empty() {
            return Err(ConfigError::invalid(
                &p::ETCD_ENDPOINTS,
                raw,
                "lists no endpoint",
            ));
        }
        let mut schemes = Vec::new();
        for e in &endpoints {
            schemes.push(check_endpoint(e).map_err(|why| {
                ConfigError::invalid(&p::ETCD_ENDPOINTS, raw, format!("{e}: {why}"))
            })?);
        }
        schemes.dedup();
        if schemes.len() > 1 {
            return Err(ConfigError::invalid(
                &p::ETCD_ENDPOINTS,
                raw,
                "mixes http and https",
            ));
        }
        let tls = schemes[0] == "https";
        let path = |param| v.get(param).map(PathBuf::from);
        let (cacert, cert, key) = (
            path(&p::ETCD_CACERT),
            path(&p::ETCD_CERT),
            path(&p::ETCD_KEY),
        );
        if tls && cacert.is_none() {
            return Err(ConfigError::invalid(
                &p::ETCD_ENDPOINTS,
                raw,
                "uses https, which needs etcd_cacert",
            ));
        }
        match (&cert, &key) {
            (Some(c), None) => {
                return Err(ConfigError::invalid(
                    &p::ETCD_CERT,
                    &c.display().to_string(),
                    "needs etcd_key too",
                ))
            }
            (None, Some(k)) => {
                return Err(ConfigError::invalid(
                    &p::ETCD_KEY,
                    &k.display().to_string(),
                    "needs etcd_cert too",
                ))
            }
            _ => {}
        }
        if !tls && (cacert.is_some() || cert.is_some()) {
            return Err(ConfigError::invalid(
                &p::ETCD_ENDPOINTS,
                raw,
                "uses http, but TLS files are set: use https:// endpoints",
            ));
        }
        let set_margin: Option<u64> = v.integer(&p::LEASE_MARGIN)?;
        let set_ttl: Option<u64> = v.integer(&p::LEASE_TTL)?;
        let ttl = match (set_ttl, set_margin) {
            (Some(t), _) => t,
            (None, Some(m)) => LeaseClock::ttl_for_margin(super::cluster::default_ttl(), m),
            (None, None) => super::cluster::default_ttl(),
        };
        if !(MIN_TTL_SECS..=MAX_TTL_SECS).contains(&ttl) {
            return Err(ConfigError::invalid(&p::LEASE_TTL, &ttl.to_string(), format!("is out of range {MIN_TTL_SECS}..{MAX_TTL_SECS} (etcd's minimum lease is {MIN_TTL_SECS} s)")));
        }
        let margin: u64 = set_margin.unwrap_or_else(|| LeaseClock::derived_margin(ttl));
        if !LeaseClock::margin_allowed(ttl, margin) {
            return Err(ConfigError::invalid(
                &p::LEASE_MARGIN,
                &margin.to_string(),
                format!("must be at least 1 and less than 2/3 of lease_ttl={ttl}"),
            ));
        }
        Ok(EtcdConfig {
            endpoints,
            prefix: v.required(&p::ETCD_PREFIX)?.to_string(),
            cluster: cluster_name(v)?,
            tls,
            cacert,
            cert,
            key,
            auth: EtcdAuth::from_values(v)?,
            ttl: p::LEASE_TTL.duration_of(ttl),
            margin: p::LEASE_MARGIN.duration_of(margin),
            ttl_from_cluster: set_ttl.is_none(),
            margin_derived: set_margin.is_none(),
            move_leader: v.boolean(&p::ETCD_MOVE_LEADER)?,
            outage: EtcdOutage::from_values(v)?,
        })
    }

    /// `{etcd_prefix}/{cluster_name}`: where this cluster's leader key, seen mark and
    /// failsafe record sit. Err: the cluster's name is not known on this node.
    pub fn scope(&self) -> Result<String, String> {
        self.cluster
            .as_ref()
            .map(|c| format!("{}/{c}", self.prefix.trim_end_matches('/')))
            .map_err(Clone::clone)
    }

    pub fn clock(&self) -> LeaseClock {
        LeaseClock {
            ttl: self.ttl,
            margin: self.margin,
        }
    }
}

/// cluster_name as set, else corosync's totem.cluster_name: Ok(Err) when no corosync answers
/// (outside a cluster, or its stack is down: the actions that need the key say so); a name
/// that cannot sit in a key, or a corosync without one, is a configuration error.
fn cluster_name(v: &Values) -> Result<Result<String, String>, ConfigError> {
    if let Some(set) = v.get(&p::CLUSTER_NAME).filter(|c| !c.is_empty()) {
        return check_cluster_name(set)
            .map(|()| Ok(set.to_string()))
            .map_err(|why| ConfigError::invalid(&p::CLUSTER_NAME, set, why));
    }
    match super::cluster::corosync_cluster_name() {
        Err(why) => Ok(Err(format!(
            "cluster_name is not set and {why}: set cluster_name to the cluster's name \
             (corosync.conf's totem.cluster_name)"
        ))),
        Ok(None) => Err(ConfigError::invalid(
            &p::CLUSTER_NAME,
            "",
            "is not set and corosync has no totem.cluster_name: name the cluster in one of them",
        )),
        Ok(Some(name)) => check_cluster_name(&name)
            .map(|()| Ok(name.clone()))
            .map_err(|why| {
                ConfigError::invalid(
                    &p::CLUSTER_NAME,
                    "",
                    format!("is not set and corosync's totem.cluster_name {name:?} {why}: set it"),
                )
            }),
    }
}

/// A name that sits in the leader key as one part of its path.
fn check_cluster_name(name: &str) -> Result<(), String> {
    if name.contains('/') || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain '/', white space or control characters".into());
    }
    Ok(())
}

/// Returns the scheme of `http(s)://host:port`.
fn check_endpoint(e: &str) -> Result<&'static str, String> {
    let (scheme, rest) = if let Some(r) = e.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = e.strip_prefix("http://") {
        ("http", r)
    } else {
        return Err("is not an http:// or https:// URL".into());
    };
    let hostport = rest.trim_end_matches('/');
    let uri: hyper::Uri = format!("{scheme}://{hostport}")
        .parse()
        .map_err(|_| "is not a valid URL".to_string())?;
    if uri.host().is_none_or(str::is_empty) || uri.port_u16().is_none() || hostport.contains('/') {
        return Err("needs host:port and no path".into());
    }
    Ok(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::master::MASTER_AGENT;

    fn config(vars: &[(&str, &str)]) -> Result<EtcdConfig, ConfigError> {
        EtcdConfig::from_values(&Values::from_reskeys(&MASTER_AGENT, vars))
    }

    #[test]
    fn the_cluster_name_is_one_part_of_the_keys_path() {
        let ep = ("etcd_endpoints", "http://192.0.2.1:2379");
        let c = config(&[ep, ("cluster_name", "lab-1"), ("etcd_prefix", "/hm/")]).unwrap();
        assert_eq!(c.scope().as_deref(), Ok("/hm/lab-1"));
        for bad in ["a/b", "a b", "x\ty"] {
            let e = config(&[ep, ("cluster_name", bad)])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("cluster_name") && e.contains("must not contain"),
                "{e}"
            );
        }
    }

    #[test]
    fn endpoints_split_and_defaults_apply() {
        let c = config(&[(
            "etcd_endpoints",
            "http://192.0.2.1:2379, http://[2001:db8::1]:2379",
        )])
        .unwrap();
        assert_eq!(
            c.endpoints,
            ["http://192.0.2.1:2379", "http://[2001:db8::1]:2379"]
        );
        assert_eq!(
            (c.ttl, c.margin, c.prefix.as_str(), c.tls),
            (
                Duration::from_secs(10),
                Duration::from_secs(2),
                "/hamaster",
                false
            )
        );
    }

    #[test]
    fn bad_settings_name_parameter_and_value() {
        let ep = ("etcd_endpoints", "http://192.0.2.1:2379");
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "required parameter etcd_endpoints is not set"),
            (
                &[("etcd_endpoints", "192.0.2.1")],
                "etcd_endpoints=\"192.0.2.1\" 192.0.2.1: is not an http:// or https:// URL",
            ),
            (&[("etcd_endpoints", "http://192.0.2.1")], "needs host:port"),
            (
                &[("etcd_endpoints", "http://a:1,https://b:2")],
                "mixes http and https",
            ),
            (&[("etcd_endpoints", "https://a:1")], "needs etcd_cacert"),
            (
                &[ep, ("lease_ttl", "ten")],
                "lease_ttl=\"ten\" is not a non-negative integer",
            ),
            (
                &[ep, ("lease_ttl", "1")],
                "lease_ttl=\"1\" is out of range 2..3600",
            ),
            (
                &[ep, ("lease_ttl", "3"), ("lease_margin", "2")],
                "lease_margin=\"2\" must be at least 1 and less than 2/3",
            ),
            (&[ep, ("lease_margin", "0")], "lease_margin=\"0\""),
            (
                &[
                    ("etcd_endpoints", "https://a:1"),
                    ("etcd_cacert", "/ca"),
                    ("etcd_cert", "/c"),
                ],
                "etcd_cert=\"/c\" needs etcd_key",
            ),
            (
                &[ep, ("etcd_user", "hamaster")],
                "etcd_user=\"hamaster\" needs etcd_password_file too",
            ),
            (
                &[ep, ("etcd_password_file", "/etc/hamaster/etcd.pw")],
                "etcd_password_file=\"/etc/hamaster/etcd.pw\" needs etcd_user too",
            ),
            (
                &[ep, ("etcd_user", "ham"), ("etcd_password_file", "etcd.pw")],
                "etcd_password_file=\"etcd.pw\" must be an absolute path",
            ),
        ];
        for (vars, want) in cases {
            let got = config(vars).unwrap_err().to_string();
            assert!(got.contains(want), "{vars:?}: {got:?} lacks {want:?}");
        }
    }

    #[test]
    fn etcd_auth_takes_a_user_and_a_password_file_never_a_password() {
        let c = config(&[
            ("etcd_endpoints", "http://a:1"),
            ("etcd_user", "hamaster"),
            ("etcd_password_file", "/etc/hamaster/etcd.pw"),
        ])
        .unwrap();
        assert_eq!(
            c.auth,
            Some(EtcdAuth {
                user: "hamaster".into(),
                password_file: "/etc/hamaster/etcd.pw".into()
            })
        );
        assert_eq!(
            config(&[("etcd_endpoints", "http://a:1")]).unwrap().auth,
            None
        );
    }

    #[test]
    fn an_unset_margin_follows_the_ttl_and_always_passes_the_rule() {
        let ep = ("etcd_endpoints", "http://a:1");
        assert_eq!(config(&[ep]).unwrap().margin, Duration::from_secs(2));
        let three = config(&[ep, ("lease_ttl", "3")]).expect("lease_ttl=3 alone is valid");
        assert_eq!(three.margin, Duration::from_secs(1));
        for (ttl, want) in [
            (2, 1),
            (3, 1),
            (4, 2),
            (6, 2),
            (7, 2),
            (8, 2),
            (10, 2),
            (15, 3),
            (30, 6),
        ] {
            assert_eq!(LeaseClock::derived_margin(ttl), want, "lease_ttl {ttl}");
        }
        for ttl in MIN_TTL_SECS..=MAX_TTL_SECS {
            let m = LeaseClock::derived_margin(ttl);
            assert!(m >= 1 && 3 * m < 2 * ttl, "lease_ttl {ttl}: margin {m}");
            // And it covers chrony's largest slew with a SIGTERM grace, at every TTL.
            let clock = crate::lease::LeaseClock {
                ttl: Duration::from_secs(ttl),
                margin: Duration::from_secs(m),
            };
            assert!(clock.needed_margin() <= clock.margin, "lease_ttl {ttl}");
            assert!(
                clock.term_grace() >= Some(crate::lease::clock::MIN_TERM_GRACE),
                "lease_ttl {ttl}: {:?}",
                clock.term_grace()
            );
        }
        // A margin set alone stays valid whatever TTL the cluster gives.
        let alone = config(&[ep, ("lease_margin", "5")]).expect("lease_margin alone");
        assert!(3 * alone.margin < 2 * alone.ttl, "{alone:?}");
        assert!(alone.ttl_from_cluster && !alone.margin_derived);
        // An explicit margin is still checked.
        let bad = config(&[ep, ("lease_ttl", "3"), ("lease_margin", "2")]).unwrap_err();
        assert!(bad.to_string().contains("lease_margin=\"2\""), "{bad}");
    }

    #[test]
    fn shortest_allowed_timing_is_ttl_3_margin_1() {
        let c = config(&[
            ("etcd_endpoints", "http://a:1"),
            ("lease_ttl", "3"),
            ("lease_margin", "1"),
        ])
        .unwrap();
        assert_eq!(c.clock().keepalive_interval(), Duration::from_secs(1));
    }
}
