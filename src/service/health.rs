//! The service's health probe, one of three checks: a GET of `health_url` (http or https, with
//! its own CA; 2xx passes; one client per guard, so connections are kept alive between
//! checks), a TCP connect to `health_url=tcp://HOST:PORT` (a connection that opens passes), or
//! `health_command` run by /bin/sh (exit status 0 passes; killed with its process group when
//! it outlives health_timeout). Every check is bounded by health_timeout.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::process::Credentials;
use super::{HealthSpec, ServiceError};
use crate::causes::causes;
use crate::params::master::HEALTH_CACERT;
use crate::params::Param;

/// System CA bundles of Debian and RHEL, used for https when health_cacert is not set.
const SYSTEM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// The most of a health answer's body that is read (and thrown away).
const MAX_BODY: usize = 64 * 1024;

pub struct HealthProbe {
    check: Check,
    timeout: Duration,
}

enum Check {
    Http {
        client: Box<Client<HttpsConnector<HttpConnector>, Empty<Bytes>>>,
        url: hyper::Uri,
    },
    Tcp {
        /// tcp://HOST:PORT as written (a Uri would show a "/" after it).
        name: String,
        host: String,
        port: u16,
    },
    Command {
        text: String,
        ids: Option<Credentials>,
        workdir: std::path::PathBuf,
    },
}

/// Whether a check passed, and what it found (for status, the log and the monitor's reason).
pub struct Checked {
    pub passed: bool,
    pub detail: String,
}

impl Checked {
    fn new(passed: bool, detail: String) -> Checked {
        Checked { passed, detail }
    }
}

/// The roots of trust in a CA file, named by `param`.
pub fn roots_from_pem(
    param: &Param,
    path: &std::path::Path,
) -> Result<rustls::RootCertStore, ServiceError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(crate::pem::certificates(param, path)?);
    if roots.is_empty() {
        return Err(crate::pem::PemError::Empty {
            param: param.name,
            path: path.display().to_string(),
            what: "usable CA certificate",
        }
        .into());
    }
    Ok(roots)
}

pub fn client_config(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

impl HealthProbe {
    /// None when the spec has no check (neither health_url nor health_command).
    pub fn new(spec: &HealthSpec) -> Result<Option<HealthProbe>, ServiceError> {
        let check = match (&spec.command, &spec.url) {
            (Some(text), _) => Check::Command {
                text: text.clone(),
                ids: spec.run_as.check_installed("health_command")?,
                workdir: spec.run_as.workdir.clone(),
            },
            (None, Some(url)) if url.scheme_str() == Some("tcp") => Check::Tcp {
                host: url
                    .host()
                    .unwrap_or_default()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                port: url.port_u16().unwrap_or_default(),
                name: format!(
                    "tcp://{}",
                    url.authority().map(|a| a.as_str()).unwrap_or_default()
                ),
            },
            (None, Some(url)) => Check::Http {
                client: Box::new(http_client(spec, url.scheme_str())?),
                url: url.clone(),
            },
            (None, None) => return Ok(None),
        };
        Ok(Some(HealthProbe {
            check,
            timeout: spec.timeout,
        }))
    }

    /// One check, within health_timeout.
    pub async fn check(&self) -> Checked {
        let within = format!("within {} ms", self.timeout.as_millis());
        match &self.check {
            Check::Http { client, url } => {
                let req = match hyper::Request::get(url.clone()).body(Empty::new()) {
                    Ok(r) => r,
                    Err(e) => return Checked::new(false, format!("{url}: {e}")),
                };
                let exchange = async {
                    let resp = client.request(req).await.map_err(|e| causes(&e))?;
                    let status = resp.status().as_u16();
                    // Read the body to its end: only then does the connection go back to the
                    // pool, and the next check reuses it instead of paying a new TCP and TLS
                    // handshake. A body over the limit is dropped with its connection.
                    let _ = Limited::new(resp.into_body(), MAX_BODY).collect().await;
                    Ok::<u16, String>(status)
                };
                match tokio::time::timeout(self.timeout, exchange).await {
                    Ok(Ok(code)) => {
                        Checked::new((200..300).contains(&code), format!("{url} answered {code}"))
                    }
                    Ok(Err(e)) => Checked::new(false, format!("{url}: {e}")),
                    Err(_) => Checked::new(false, format!("{url}: no answer {within}")),
                }
            }
            Check::Tcp { name, host, port } => {
                let connect = async {
                    let mut last = None;
                    for addr in tokio::net::lookup_host((host.as_str(), *port))
                        .await
                        .map_err(|e| format!("cannot resolve {host}: {e}"))?
                    {
                        match tokio::net::TcpStream::connect(addr).await {
                            Ok(_) => return Ok(()),
                            Err(e) => last = Some(e.to_string()),
                        }
                    }
                    Err(last.unwrap_or_else(|| format!("{host} has no address")))
                };
                match tokio::time::timeout(self.timeout, connect).await {
                    Ok(Ok(())) => Checked::new(true, format!("{name} accepted a connection")),
                    Ok(Err(e)) => Checked::new(false, format!("{name}: {e}")),
                    Err(_) => Checked::new(false, format!("{name}: no connection {within}")),
                }
            }
            Check::Command { text, ids, workdir } => {
                let hook = super::hook::Hook {
                    name: "health_command",
                    text,
                    ids,
                    workdir,
                };
                match hook.run(&[], self.timeout, &within).await {
                    Ok(()) => Checked::new(true, "health_command exited 0".to_string()),
                    Err(why) => Checked::new(false, why),
                }
            }
        }
    }
}

/// The HTTP(S) client of an http:// or https:// health_url, trusting health_cacert, else
/// (https) the system's bundle.
fn http_client(
    spec: &HealthSpec,
    scheme: Option<&str>,
) -> Result<Client<HttpsConnector<HttpConnector>, Empty<Bytes>>, ServiceError> {
    let roots = match (&spec.cacert, scheme) {
        (Some(path), _) => roots_from_pem(&HEALTH_CACERT, path)?,
        (None, Some("https")) => SYSTEM_BUNDLES
            .iter()
            .map(std::path::Path::new)
            .find(|p| p.exists())
            .map(|p| roots_from_pem(&HEALTH_CACERT, p))
            .transpose()?
            .unwrap_or_else(rustls::RootCertStore::empty),
        (None, _) => rustls::RootCertStore::empty(),
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(spec.timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client_config(roots))
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(https))
}

/// The health verdict from the checks in a row (pure: the guard's health watch feeds it).
/// Before the first passed check nothing is healthy (promote waits for it); once a check has
/// passed, `failures` failed checks in a row make the service unhealthy, fewer are forgiven; a
/// service that is not running is unhealthy at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthCount {
    passed_once: bool,
    failed_in_a_row: u32,
}

impl HealthCount {
    /// One check's outcome (`passed`: it ran and answered 2xx) for a service that is
    /// `running`, with `failures` the failures in a row that count as unhealthy: the verdict.
    pub fn checked(&mut self, passed: bool, running: bool, failures: u32) -> bool {
        let passed = passed && running;
        self.failed_in_a_row = if passed {
            0
        } else {
            self.failed_in_a_row.saturating_add(1)
        };
        let healthy = passed || (running && self.passed_once && self.failed_in_a_row < failures);
        self.passed_once |= passed;
        healthy
    }

    /// Failed checks in a row so far.
    pub fn failed_in_a_row(&self) -> u32 {
        self.failed_in_a_row
    }

    /// Whether a check has passed (the next check waits health_interval, not 25 ms).
    pub fn passed_once(&self) -> bool {
        self.passed_once
    }

    /// Another check (a new URL or CA): its failures count afresh, and like the first check
    /// of all it must pass once before a failure is forgiven.
    pub fn new_check(&mut self) {
        *self = HealthCount::default();
    }
}

#[cfg(test)]
mod count_tests {
    use super::HealthCount;

    #[test]
    fn nothing_is_healthy_before_the_first_passed_check() {
        let mut c = HealthCount::default();
        assert!(!c.checked(false, true, 3));
        assert!(!c.checked(false, true, 3));
        assert!(c.checked(true, true, 3));
        assert!(c.passed_once());
    }

    #[test]
    fn fewer_failures_in_a_row_than_health_failures_are_forgiven() {
        let mut c = HealthCount::default();
        assert!(c.checked(true, true, 3));
        assert!(c.checked(false, true, 3));
        assert!(c.checked(false, true, 3));
        assert!(
            !c.checked(false, true, 3),
            "the third failure in a row counts"
        );
        assert_eq!(c.failed_in_a_row(), 3);
        assert!(c.checked(true, true, 3), "one pass makes it healthy again");
        assert_eq!(c.failed_in_a_row(), 0);
        assert!(c.checked(false, true, 3), "and forgives again");
    }

    #[test]
    fn one_failure_counts_at_once_with_health_failures_1() {
        let mut c = HealthCount::default();
        assert!(c.checked(true, true, 1));
        assert!(!c.checked(false, true, 1));
    }

    #[test]
    fn a_service_that_is_not_running_is_unhealthy_at_once() {
        let mut c = HealthCount::default();
        assert!(c.checked(true, true, 5));
        assert!(!c.checked(false, false, 5));
        // A "pass" for a service that is not running is none.
        assert!(!c.checked(true, false, 5));
    }

    #[test]
    fn a_new_check_must_pass_before_its_failures_are_forgiven() {
        let mut c = HealthCount::default();
        assert!(c.checked(true, true, 3));
        c.new_check();
        assert!(!c.checked(false, true, 3));
        assert!(c.checked(true, true, 3));
        assert!(c.checked(false, true, 3));
    }
}
