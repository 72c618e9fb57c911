//! The master service: its configuration (a supervised command or a systemd unit), starting,
//! stopping (TERM, then KILL) and watching it, and its health probe (an HTTP(S) GET, a TCP
//! connect, or a command).
//! It knows nothing of etcd or addresses.

pub mod health;
pub mod hook;
pub mod output;
pub mod process;
pub mod stop;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::params::master as p;
use crate::params::{ConfigError, Values};

pub use health::{HealthCount, HealthProbe};
pub use process::{Credentials, Running};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ServiceSpec {
    Command {
        program: PathBuf,
        args: Vec<String>,
        /// Flattened: the fields `workdir` and `user`, as before it was one value.
        #[serde(flatten)]
        run_as: RunAs,
    },
    Systemd {
        unit: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HealthSpec {
    #[serde(with = "uri_text")]
    pub url: Option<hyper::Uri>,
    pub cacert: Option<PathBuf>,
    pub timeout: Duration,
    /// Time between checks once the service has been healthy.
    pub interval: Duration,
    /// Consecutive failed checks before the service counts as unhealthy.
    pub failures: u32,
    /// health_command: run by /bin/sh -c; exit status 0 is a passed check.
    #[serde(default)]
    pub command: Option<String>,
    /// The user and working directory health_command runs as: the service's.
    #[serde(flatten)]
    pub run_as: RunAs,
}

/// The user (`user=`) and working directory (`workdir=`) a supervised command and
/// health_command run as: read and checked once for both.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunAs {
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default = "root_dir")]
    pub workdir: PathBuf,
}

fn root_dir() -> PathBuf {
    PathBuf::from("/")
}

impl RunAs {
    pub fn from_values(v: &Values) -> Result<RunAs, ConfigError> {
        let workdir = PathBuf::from(v.get(&p::WORKDIR).unwrap_or("/"));
        if !workdir.is_absolute() {
            return Err(ConfigError::invalid(
                &p::WORKDIR,
                &workdir.display().to_string(),
                "is not an absolute path",
            ));
        }
        Ok(RunAs {
            user: v.get(&p::USER).map(String::from),
            workdir,
        })
    }

    /// What must exist on this node to run as this: the directory, and the user (looked up
    /// once: its ids and groups, None for the agent's own). `what` names who runs there.
    pub fn check_installed(&self, what: &str) -> Result<Option<Credentials>, ServiceError> {
        if !self.workdir.is_dir() {
            return Err(ServiceError::NotInstalled(format!(
                "parameter workdir=\"{}\" is not a directory on this node ({what} runs there)",
                self.workdir.display()
            )));
        }
        self.user
            .as_deref()
            .map(process::credentials)
            .transpose()
            .map_err(ServiceError::NotInstalled)
    }
}

/// A running service as the guard's fencing side and the agent's clean-up address it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceRef {
    /// A supervised command: the leader of its own process group.
    Group(u32),
    /// A systemd unit.
    Unit(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Something this node lacks (a program, a user, a file): OCF_ERR_INSTALLED.
    #[error("{0}")]
    NotInstalled(String),
    /// A parameter's PEM file: unreadable (5) or holding nothing usable (6).
    #[error(transparent)]
    Pem(#[from] crate::pem::PemError),
    /// The service could not be started or asked on this node now: OCF_ERR_GENERIC.
    #[error("{0}")]
    Failed(String),
}

impl ServiceSpec {
    pub fn from_values(v: &Values) -> Result<ServiceSpec, ConfigError> {
        match (v.get(&p::SERVICE), v.get(&p::COMMAND)) {
            (Some(s), Some(_)) => Err(ConfigError::invalid(
                &p::SERVICE,
                s,
                "and command are both set; set exactly one",
            )),
            (None, None) => Err(ConfigError::Missing {
                param: "service or command",
            }),
            (Some(unit), None) => {
                // A leading '-' would reach systemctl as an option (`--` guards the calls too).
                let ok = !unit.is_empty()
                    && !unit.starts_with('-')
                    && unit
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c));
                if !ok {
                    return Err(ConfigError::invalid(
                        &p::SERVICE,
                        unit,
                        "is not a systemd unit name",
                    ));
                }
                Ok(ServiceSpec::Systemd {
                    unit: unit.to_string(),
                })
            }
            (None, Some(cmd)) => {
                if !cmd.starts_with('/') {
                    return Err(ConfigError::invalid(
                        &p::COMMAND,
                        cmd,
                        "is not an absolute path",
                    ));
                }
                let args = match v.get(&p::ARGS) {
                    None => Vec::new(),
                    Some(a) => shell_words::split(a).map_err(|e| {
                        ConfigError::invalid(
                            &p::ARGS,
                            a,
                            format!("cannot be split into words: {e}"),
                        )
                    })?,
                };
                Ok(ServiceSpec::Command {
                    program: PathBuf::from(cmd),
                    args,
                    run_as: RunAs::from_values(v)?,
                })
            }
        }
    }

    /// What must exist on this node for the service to run here.
    pub fn check_installed(&self) -> Result<(), ServiceError> {
        match self {
            ServiceSpec::Command {
                program, run_as, ..
            } => {
                if !is_executable(program) {
                    return Err(ServiceError::NotInstalled(format!(
                        "parameter command=\"{}\" is not an executable file on this node",
                        program.display()
                    )));
                }
                run_as.check_installed("the command").map(|_| ())
            }
            ServiceSpec::Systemd { .. } => {
                if find_in_path("systemctl").is_none() {
                    return Err(ServiceError::NotInstalled(
                        "parameter service is set, but systemctl is not installed".into(),
                    ));
                }
                Ok(())
            }
        }
    }
}

impl HealthSpec {
    pub fn from_values(v: &Values) -> Result<HealthSpec, ConfigError> {
        let url = match v.get(&p::HEALTH_URL) {
            None => None,
            Some(text) => {
                let uri: hyper::Uri = text
                    .parse()
                    .map_err(|_| ConfigError::invalid(&p::HEALTH_URL, text, "is not a URL"))?;
                let why = match uri.scheme_str() {
                    _ if uri.host().is_none_or(str::is_empty) => Some("has no host"),
                    Some("http") | Some("https") => None,
                    Some("tcp") if uri.port_u16().is_none_or(|p| p == 0) => {
                        Some("is a tcp:// check without a port")
                    }
                    Some("tcp") if !matches!(uri.path(), "" | "/") || uri.query().is_some() => {
                        Some("is a tcp:// check with a path (tcp://HOST:PORT only)")
                    }
                    Some("tcp") => None,
                    _ => Some("is not an http://, https:// or tcp:// URL"),
                };
                if let Some(why) = why {
                    return Err(ConfigError::invalid(&p::HEALTH_URL, text, why));
                }
                Some(uri)
            }
        };
        let command = v.get(&p::HEALTH_COMMAND).map(String::from);
        if let (Some(c), Some(_)) = (&command, &url) {
            return Err(ConfigError::invalid(
                &p::HEALTH_COMMAND,
                c,
                "and health_url are both set; set one (a command can make both checks)",
            ));
        }
        if command.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(ConfigError::invalid(
                &p::HEALTH_COMMAND,
                command.as_deref().unwrap_or_default(),
                "is empty",
            ));
        }
        let timeout = v.duration(&p::HEALTH_TIMEOUT)?;
        let interval = v.duration(&p::HEALTH_INTERVAL)?;
        let failures = v.number(&p::HEALTH_FAILURES)?;
        Ok(HealthSpec {
            url,
            cacert: v.get(&p::HEALTH_CACERT).map(PathBuf::from),
            timeout,
            interval,
            failures,
            command,
            run_as: RunAs::from_values(v)?,
        })
    }
}

/// A URL as its text, for the configuration the agent hands its guard (resource::config).
mod uri_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(u: &Option<hyper::Uri>, s: S) -> Result<S::Ok, S::Error> {
        u.as_ref().map(|u| u.to_string()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<hyper::Uri>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// One of the host's command-line tools (crm_node, crm_resource, corosync-cmapctl,
/// systemctl, crm_attribute), bounded by timeout(1) to `limit`, with nothing on its standard
/// input and its standard error dropped: its standard output when it exits 0, else None
/// (missing, failed, timed out, or no time left to run it at all).
pub fn tool_output(limit: std::time::Duration, program: &str, args: &[&str]) -> Option<String> {
    tool_run(limit, program, args).ok()
}

/// `tool_output`, saying why it failed: the command line, its exit status and its standard
/// error (for an operator's command, where the tool's own words are the best reason).
pub fn tool_run(
    limit: std::time::Duration,
    program: &str,
    args: &[&str],
) -> Result<String, String> {
    // timeout(1) takes fractions of a second; 0 would mean no limit at all.
    if limit < std::time::Duration::from_millis(1) {
        return Err(format!("no time left to run {program}"));
    }
    let out = std::process::Command::new("timeout")
        .arg(format!("{:.3}", limit.as_secs_f64()))
        .arg(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        said.trim()
    ))
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

impl crate::ocf::failure::Failure for ServiceError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            ServiceError::NotInstalled(_) => crate::ocf::OcfExit::ErrInstalled,
            ServiceError::Pem(e) => e.exit(),
            ServiceError::Failed(_) => crate::ocf::OcfExit::ErrGeneric,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::master::MASTER_AGENT;

    fn values(vars: &[(&str, &str)]) -> Values {
        Values::from_reskeys(&MASTER_AGENT, vars)
    }

    #[test]
    fn args_are_split_like_a_shell_without_running_one() {
        let s = ServiceSpec::from_values(&values(&[
            ("command", "/bin/echo"),
            ("args", r#"--name "api server" 'a b' $HOME;x"#),
        ]))
        .unwrap();
        let ServiceSpec::Command { args, .. } = s else {
            panic!()
        };
        assert_eq!(args, ["--name", "api server", "a b", "$HOME;x"]);
    }

    #[test]
    fn exactly_one_of_service_and_command() {
        let both = ServiceSpec::from_values(&values(&[
            ("command", "/bin/true"),
            ("service", "api.service"),
        ]))
        .unwrap_err();
        assert!(
            both.to_string()
                .contains("service=\"api.service\" and command are both set"),
            "{both}"
        );
        let neither = ServiceSpec::from_values(&values(&[])).unwrap_err();
        assert_eq!(
            neither.to_string(),
            "required parameter service or command is not set"
        );
        assert!(ServiceSpec::from_values(&values(&[("command", "bin/x")])).is_err());
        assert!(
            ServiceSpec::from_values(&values(&[("command", "/bin/x"), ("args", "\"open")]))
                .unwrap_err()
                .to_string()
                .contains("args=\"\"open\" cannot be split into words")
        );
    }

    #[test]
    fn health_url_must_be_http_https_or_tcp_with_a_host() {
        assert!(HealthSpec::from_values(&values(&[(
            "health_url",
            "https://192.0.2.10:8443/healthz"
        )]))
        .unwrap()
        .url
        .is_some());
        let tcp = HealthSpec::from_values(&values(&[("health_url", "tcp://[::1]:6443")])).unwrap();
        assert_eq!(tcp.url.unwrap().port_u16(), Some(6443));
        for bad in [
            "ftp://x/healthz",
            "not a url",
            "/healthz",
            "http://",
            "tcp://127.0.0.1",
            "tcp://127.0.0.1:0",
            "tcp://127.0.0.1:6443/healthz",
        ] {
            let err = HealthSpec::from_values(&values(&[("health_url", bad)]))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("health_url=\"{bad}\"")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn health_command_is_one_check_and_never_empty() {
        let c = HealthSpec::from_values(&values(&[
            ("health_command", "curl -fsS http://127.0.0.1/healthz"),
            ("user", "nobody"),
        ]))
        .unwrap();
        assert_eq!(
            c.command.as_deref(),
            Some("curl -fsS http://127.0.0.1/healthz")
        );
        assert_eq!(c.run_as.user.as_deref(), Some("nobody"));
        let both = HealthSpec::from_values(&values(&[
            ("health_command", "true"),
            ("health_url", "http://127.0.0.1/h"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            both.contains("health_command=\"true\" and health_url are both set"),
            "{both}"
        );
        let empty = HealthSpec::from_values(&values(&[("health_command", "  ")]))
            .unwrap_err()
            .to_string();
        assert!(empty.contains("health_command=\"  \" is empty"), "{empty}");
    }

    #[test]
    fn run_as_needs_its_directory_and_its_user_on_this_node() {
        let relative = RunAs::from_values(&values(&[("workdir", "srv/api")]))
            .unwrap_err()
            .to_string();
        assert!(
            relative.contains("workdir=\"srv/api\" is not an absolute path"),
            "{relative}"
        );
        let missing = RunAs::from_values(&values(&[("workdir", "/nonexistent/hamaster")]))
            .unwrap()
            .check_installed("health_command")
            .unwrap_err();
        assert!(matches!(missing, ServiceError::NotInstalled(_)));
        assert!(
            missing.to_string().contains(
                "workdir=\"/nonexistent/hamaster\" is not a directory on this node \
                 (health_command runs there)"
            ),
            "{missing}"
        );
        let nobody = RunAs::from_values(&values(&[("user", "hamaster-no-such-user")]))
            .unwrap()
            .check_installed("the command")
            .unwrap_err();
        assert!(
            nobody
                .to_string()
                .contains("user=\"hamaster-no-such-user\" is not a user on this node"),
            "{nobody}"
        );
        let root = RunAs::from_values(&values(&[("user", "root")])).unwrap();
        let (uid, _, _) = root.check_installed("the command").unwrap().unwrap();
        assert_eq!(uid.as_raw(), 0);
        // The configuration the guard reads keeps its fields where they were.
        let spec = ServiceSpec::Command {
            program: "/bin/true".into(),
            args: vec![],
            run_as: root,
        };
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["Command"]["user"], "root");
        assert_eq!(json["Command"]["workdir"], "/");
        assert_eq!(serde_json::from_value::<ServiceSpec>(json).unwrap(), spec);
    }
}
