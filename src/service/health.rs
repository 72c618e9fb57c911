//! The service's health probe: one GET of `health_url` (http or https, with its own CA), 2xx
//! means healthy. One client per guard, so connections are kept alive between checks.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

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
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    url: hyper::Uri,
    timeout: Duration,
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
    /// None when the spec has no URL.
    pub fn new(spec: &HealthSpec) -> Result<Option<HealthProbe>, ServiceError> {
        let Some(url) = spec.url.clone() else {
            return Ok(None);
        };
        let roots = match (&spec.cacert, url.scheme_str()) {
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
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https);
        Ok(Some(HealthProbe {
            client,
            url,
            timeout: spec.timeout,
        }))
    }

    /// Ok(status) for an answer in time (healthy when 2xx), Err(why) otherwise.
    pub async fn check(&self) -> Result<u16, String> {
        let req = hyper::Request::get(self.url.clone())
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| causes(&e))?;
            let status = resp.status().as_u16();
            // Read the body to its end: only then does the connection go back to the pool,
            // and the next check reuses it instead of paying a new TCP and TLS handshake.
            // A body over the limit is dropped with its connection.
            let _ = Limited::new(resp.into_body(), MAX_BODY).collect().await;
            Ok(status)
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
        }
    }

    pub fn url(&self) -> &hyper::Uri {
        &self.url
    }
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
