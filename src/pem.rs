//! PEM files named by parameters (etcd_cacert, etcd_cert, etcd_key, health_cacert) and the
//! password file (etcd_password_file), read and checked in one place: a file that cannot be read is this node's lack, one that holds no PEM
//! object of the kind asked is a configuration error; both name the parameter and the path.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::params::Param;

/// What a PEM file must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemKind {
    /// One certificate at least (a CA bundle may hold many).
    Certificates,
    PrivateKey,
}

impl PemKind {
    const fn name(self) -> &'static str {
        match self {
            PemKind::Certificates => "PEM certificate",
            PemKind::PrivateKey => "PEM private key",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("parameter {param}=\"{path}\" cannot be read: {source}")]
    Unreadable {
        param: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("parameter {param}=\"{path}\" holds no {what}")]
    Empty {
        param: &'static str,
        path: String,
        what: &'static str,
    },
}

/// The file's bytes, once they are known to hold what `kind` asks.
pub fn read(param: &Param, path: &Path, kind: PemKind) -> Result<Vec<u8>, PemError> {
    let pem = std::fs::read(path).map_err(|source| PemError::Unreadable {
        param: param.name,
        path: path.display().to_string(),
        source,
    })?;
    if holds(&pem, kind) {
        Ok(pem)
    } else {
        Err(PemError::Empty {
            param: param.name,
            path: path.display().to_string(),
            what: kind.name(),
        })
    }
}

/// The password in a file: its first line, without the line end. An empty one is a
/// configuration error, as a PEM file without its object is.
pub fn password(param: &Param, path: &Path) -> Result<String, PemError> {
    let text = std::fs::read_to_string(path).map_err(|source| PemError::Unreadable {
        param: param.name,
        path: path.display().to_string(),
        source,
    })?;
    let first = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if first.is_empty() {
        return Err(PemError::Empty {
            param: param.name,
            path: path.display().to_string(),
            what: "password on its first line",
        });
    }
    Ok(first.to_string())
}

/// The certificates of a file (a CA bundle), at least one.
pub fn certificates(param: &Param, path: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let pem = read(param, path, PemKind::Certificates)?;
    Ok(CertificateDer::pem_slice_iter(&pem).flatten().collect())
}

/// Whether `pem` holds at least one object of the kind: one certificate that parses, or a
/// private key.
fn holds(pem: &[u8], kind: PemKind) -> bool {
    match kind {
        PemKind::Certificates => CertificateDer::pem_slice_iter(pem).any(|c| c.is_ok()),
        PemKind::PrivateKey => PrivateKeyDer::from_pem_slice(pem).is_ok(),
    }
}

/// A file that cannot be read is this node's lack (5); one that holds nothing usable is wrong
/// wherever it runs (6).
impl crate::ocf::failure::Failure for PemError {
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            PemError::Unreadable { .. } => crate::ocf::OcfExit::ErrInstalled,
            PemError::Empty { .. } => crate::ocf::OcfExit::ErrConfigured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::master::{ETCD_KEY, HEALTH_CACERT};

    #[test]
    fn a_file_is_read_once_checked_and_named_by_its_parameter() {
        let dir = std::env::temp_dir().join(format!("hamaster-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = certificates(&HEALTH_CACERT, &junk).unwrap_err();
        assert!(matches!(
            e,
            PemError::Empty {
                param: "health_cacert",
                what: "PEM certificate",
                ..
            }
        ));
        let e = read(&ETCD_KEY, &junk, PemKind::PrivateKey).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "parameter etcd_key=\"{}\" holds no PEM private key",
                junk.display()
            )
        );
        let missing = dir.join("missing.pem");
        let e = certificates(&HEALTH_CACERT, &missing).unwrap_err();
        assert!(
            matches!(
                e,
                PemError::Unreadable {
                    param: "health_cacert",
                    ..
                }
            ),
            "{e}"
        );
        // A certificate block whose base64 is broken is no certificate either.
        std::fs::write(
            &junk,
            "-----BEGIN CERTIFICATE-----\n@@@\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(certificates(&HEALTH_CACERT, &junk).is_err());
        // A password is the first line, its line end (LF or CRLF) not part of it.
        use crate::params::master::ETCD_PASSWORD_FILE as PW;
        std::fs::write(&junk, "s3cret word\r\nsecond line\n").unwrap();
        assert_eq!(password(&PW, &junk).unwrap(), "s3cret word");
        std::fs::write(&junk, "\nlater\n").unwrap();
        assert_eq!(
            password(&PW, &junk).unwrap_err().to_string(),
            format!(
                "parameter etcd_password_file=\"{}\" holds no password on its first line",
                junk.display()
            )
        );
        assert!(matches!(
            password(&PW, &missing),
            Err(PemError::Unreadable { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
