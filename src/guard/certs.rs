//! Certificates renewed in place while the guard leads: etcd_cacert, etcd_cert and etcd_key
//! are read again every CHECK_EVERY, and new contents that a member accepts are used from the
//! next connection on (lease::etcd::Etcd::reload_tls); unusable ones are said once and the
//! ones in use kept. (health_cacert is the health watch's: guard::health.)

use std::time::Duration;

use crate::lease::etcd::{Etcd, TlsReload};

/// How often the files are read: a renewal tool (certmonger, cert-manager, a cron job) replaces
/// them well before the old ones expire; a few seconds late costs nothing.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Checks every CHECK_EVERY until aborted.
pub async fn keep_etcd_tls_current(etcd: Etcd, resource: String) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        match etcd.reload_tls().await {
            TlsReload::Unchanged | TlsReload::StillRefused => {}
            TlsReload::Reloaded => log::info!(
                "guard {resource}: new etcd TLS files (etcd_cacert, etcd_cert, etcd_key) accepted \
                 by etcd: used from the next connection on"
            ),
            TlsReload::Refused(why) => log::warn!(
                "guard {resource}: new etcd TLS files not used, the ones in use are kept: {why}"
            ),
        }
    }
}
