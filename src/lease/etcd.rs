//! etcd requests of the guard: grant, acquire in one transaction, verify, keep alive, watch,
//! release. Every request is bounded by a timeout; errors carry the endpoints and the full
//! cause chain, because "transport error" alone helps nobody at 3 a.m.

use std::fs;
use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, EventType, Identity,
    LeaseKeepAliveStream, LeaseKeeper, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse,
    WatchOptions, WatchStream,
};

use super::{EtcdConfig, LeaseId};
use crate::causes::causes;
use crate::params::master as p;

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("parameter {param}=\"{path}\" cannot be read: {source}")]
    Unreadable {
        param: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("parameter {param}=\"{path}\" holds no PEM {what}")]
    BadPem {
        param: &'static str,
        path: String,
        what: &'static str,
    },
    #[error("etcd {endpoints}: {detail}")]
    Etcd { endpoints: String, detail: String },
    #[error("etcd {endpoints}: no answer within {ms} ms to {op}")]
    Timeout {
        endpoints: String,
        op: &'static str,
        ms: u128,
    },
}

/// The current holder of the leader key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub node: String,
    pub lease: LeaseId,
    /// The key's create revision: the holder's fencing token.
    pub token: i64,
    /// What etcd says is left of the holder's lease (None when it could not be read).
    pub ttl_left: Option<Duration>,
    /// The store revision at which this was read: watch from the next one.
    pub revision: i64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "leader key held by {} (lease {}", self.node, self.lease)?;
        match self.ttl_left {
            Some(t) => write!(f, ", {} s left)", t.as_secs()),
            None => write!(f, ")"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// We created the key; `token` is its create revision.
    Won {
        token: i64,
    },
    Held(Holder),
}

/// What a watch on the leader key saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyEvent {
    Deleted,
    /// Written again, under `lease`.
    Put {
        lease: LeaseId,
    },
}

#[derive(Clone)]
pub struct Etcd {
    client: Client,
    endpoints: String,
    timeout: Duration,
}

fn read(param: &'static str, path: &std::path::Path) -> Result<Vec<u8>, LeaseError> {
    fs::read(path).map_err(|source| LeaseError::Unreadable {
        param,
        path: path.display().to_string(),
        source,
    })
}

fn check_pem(
    param: &'static str,
    path: &std::path::Path,
    pem: &[u8],
    key: bool,
) -> Result<(), LeaseError> {
    let mut reader = pem;
    let ok = if key {
        matches!(rustls_pemfile::private_key(&mut reader), Ok(Some(_)))
    } else {
        rustls_pemfile::certs(&mut reader)
            .next()
            .is_some_and(|c| c.is_ok())
    };
    if ok {
        Ok(())
    } else {
        let what = if key { "private key" } else { "certificate" };
        Err(LeaseError::BadPem {
            param,
            path: path.display().to_string(),
            what,
        })
    }
}

/// Reads and checks the TLS files named in the configuration.
pub fn tls_options(cfg: &EtcdConfig) -> Result<Option<TlsOptions>, LeaseError> {
    if !cfg.tls {
        return Ok(None);
    }
    let mut tls = TlsOptions::new();
    if let Some(path) = &cfg.cacert {
        let pem = read(p::ETCD_CACERT.name, path)?;
        check_pem(p::ETCD_CACERT.name, path, &pem, false)?;
        tls = tls.ca_certificate(Certificate::from_pem(pem));
    }
    if let (Some(cert), Some(key)) = (&cfg.cert, &cfg.key) {
        let cert_pem = read(p::ETCD_CERT.name, cert)?;
        check_pem(p::ETCD_CERT.name, cert, &cert_pem, false)?;
        let key_pem = read(p::ETCD_KEY.name, key)?;
        check_pem(p::ETCD_KEY.name, key, &key_pem, true)?;
        tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
    }
    Ok(Some(tls))
}

impl Etcd {
    /// Prepares a client; the connection itself is made by the first request. `timeout`
    /// bounds every unary request.
    pub async fn connect(cfg: &EtcdConfig, timeout: Duration) -> Result<Etcd, LeaseError> {
        let endpoints = cfg.endpoints.join(",");
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_keep_alive(Duration::from_secs(1), timeout)
            .with_keep_alive_while_idle(true);
        if let Some(tls) = tls_options(cfg)? {
            opts = opts.with_tls(tls);
        }
        let client = Client::connect(&cfg.endpoints, Some(opts))
            .await
            .map_err(|e| LeaseError::Etcd {
                endpoints: endpoints.clone(),
                detail: causes(&e),
            })?;
        Ok(Etcd {
            client,
            endpoints,
            timeout,
        })
    }

    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }

    async fn bounded<T>(
        &self,
        op: &'static str,
        f: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, LeaseError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(LeaseError::Etcd {
                endpoints: self.endpoints.clone(),
                detail: format!("{op}: {}", causes(&e)),
            }),
            Err(_) => Err(LeaseError::Timeout {
                endpoints: self.endpoints.clone(),
                op,
                ms: self.timeout.as_millis(),
            }),
        }
    }

    pub async fn grant(&self, ttl: Duration) -> Result<(LeaseId, Duration), LeaseError> {
        let mut c = self.client.clone();
        let r = self
            .bounded("lease grant", c.lease_grant(ttl.as_secs() as i64, None))
            .await?;
        Ok((LeaseId(r.id()), Duration::from_secs(r.ttl().max(0) as u64)))
    }

    /// Creates the key under our lease if nobody holds it, in one transaction; else reads the
    /// holder.
    pub async fn try_acquire(
        &self,
        key: &str,
        node: &str,
        lease: LeaseId,
    ) -> Result<Acquire, LeaseError> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                node,
                Some(PutOptions::new().with_lease(lease.0)),
            )])
            .or_else([TxnOp::get(key, None)]);
        let mut c = self.client.clone();
        let r = self.bounded("acquire transaction", c.txn(txn)).await?;
        let revision = r.header().map_or(0, |h| h.revision());
        if r.succeeded() {
            return Ok(Acquire::Won { token: revision });
        }
        let kv = r.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(g) => g.kvs().first().cloned(),
            _ => None,
        });
        match kv {
            Some(kv) => {
                let lease = LeaseId(kv.lease());
                let node = String::from_utf8_lossy(kv.value()).into_owned();
                let ttl_left = self.ttl_left(lease).await.ok().flatten();
                Ok(Acquire::Held(Holder {
                    node,
                    lease,
                    token: kv.create_revision(),
                    ttl_left,
                    revision,
                }))
            }
            // Deleted between the compare and the get: the next attempt will win or see it.
            None => Ok(Acquire::Held(Holder {
                node: String::new(),
                lease: LeaseId(0),
                token: 0,
                ttl_left: None,
                revision,
            })),
        }
    }

    /// The key's holder, if any.
    pub async fn holder(&self, key: &str) -> Result<Option<Holder>, LeaseError> {
        let mut c = self.client.clone();
        let r = self.bounded("get leader key", c.get(key, None)).await?;
        let revision = r.header().map_or(0, |h| h.revision());
        let Some(kv) = r.kvs().first().cloned() else {
            return Ok(None);
        };
        let lease = LeaseId(kv.lease());
        let ttl_left = self.ttl_left(lease).await.ok().flatten();
        Ok(Some(Holder {
            node: String::from_utf8_lossy(kv.value()).into_owned(),
            lease,
            token: kv.create_revision(),
            ttl_left,
            revision,
        }))
    }

    /// Remaining TTL of a lease; None when it no longer exists.
    pub async fn ttl_left(&self, lease: LeaseId) -> Result<Option<Duration>, LeaseError> {
        if lease.0 == 0 {
            return Ok(None);
        }
        let mut c = self.client.clone();
        let r = self
            .bounded("lease time-to-live", c.lease_time_to_live(lease.0, None))
            .await?;
        Ok((r.ttl() > 0).then(|| Duration::from_secs(r.ttl() as u64)))
    }

    /// Deletes the key only while it still carries our lease, then revokes the lease.
    /// Returns whether the key was ours and is now gone.
    pub async fn release(&self, key: &str, lease: LeaseId) -> Result<bool, LeaseError> {
        let txn = Txn::new()
            .when([Compare::lease(key, CompareOp::Equal, lease.0)])
            .and_then([TxnOp::delete(key, None)]);
        let mut c = self.client.clone();
        let deleted = self
            .bounded("release transaction", c.txn(txn))
            .await?
            .succeeded();
        match self.bounded("lease revoke", c.lease_revoke(lease.0)).await {
            Ok(_) => Ok(deleted),
            // Already gone (expired or revoked): nothing left to release.
            Err(LeaseError::Etcd { detail, .. }) if detail.contains("lease not found") => {
                Ok(deleted)
            }
            Err(e) => Err(e),
        }
    }

    pub async fn revoke(&self, lease: LeaseId) -> Result<(), LeaseError> {
        let mut c = self.client.clone();
        self.bounded("lease revoke", c.lease_revoke(lease.0))
            .await
            .map(drop)
    }

    /// Watches the key from `revision` on.
    pub async fn watch(&self, key: &str, revision: i64) -> Result<KeyWatch, LeaseError> {
        let mut c = self.client.clone();
        let stream = self
            .bounded(
                "watch",
                c.watch(key, Some(WatchOptions::new().with_start_revision(revision))),
            )
            .await?;
        Ok(KeyWatch {
            stream,
            endpoints: self.endpoints.clone(),
        })
    }

    pub fn keepalive(&self, lease: LeaseId) -> KeepAlive {
        KeepAlive {
            etcd: self.clone(),
            lease,
            stream: None,
        }
    }
}

pub struct KeyWatch {
    stream: WatchStream,
    endpoints: String,
}

impl KeyWatch {
    /// The next change of the key. Errors and the end of the stream are errors: the caller
    /// decides whether to watch again.
    pub async fn next(&mut self) -> Result<KeyEvent, LeaseError> {
        loop {
            let msg = self.stream.message().await.map_err(|e| LeaseError::Etcd {
                endpoints: self.endpoints.clone(),
                detail: causes(&e),
            })?;
            let Some(msg) = msg else {
                return Err(LeaseError::Etcd {
                    endpoints: self.endpoints.clone(),
                    detail: "watch stream ended".into(),
                });
            };
            if msg.canceled() {
                return Err(LeaseError::Etcd {
                    endpoints: self.endpoints.clone(),
                    detail: format!("watch canceled: {}", msg.cancel_reason()),
                });
            }
            if let Some(ev) = msg.events().last() {
                return Ok(match ev.event_type() {
                    EventType::Delete => KeyEvent::Deleted,
                    EventType::Put => KeyEvent::Put {
                        lease: LeaseId(ev.kv().map_or(0, |kv| kv.lease())),
                    },
                });
            }
        }
    }
}

/// Lease renewals over one keepalive stream, reopened after any failure.
pub struct KeepAlive {
    etcd: Etcd,
    lease: LeaseId,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

impl KeepAlive {
    /// One renewal, bounded by `timeout`; returns the TTL etcd granted (zero: the lease is gone).
    pub async fn renew(&mut self, timeout: Duration) -> Result<Duration, LeaseError> {
        let result = tokio::time::timeout(timeout, self.renew_unbounded()).await;
        let outcome = match result {
            Ok(r) => r,
            Err(_) => Err(LeaseError::Timeout {
                endpoints: self.etcd.endpoints.clone(),
                op: "lease keepalive",
                ms: timeout.as_millis(),
            }),
        };
        if outcome.is_err() {
            self.stream = None;
        }
        outcome
    }

    async fn renew_unbounded(&mut self) -> Result<Duration, LeaseError> {
        let err = |e: etcd_client::Error| LeaseError::Etcd {
            endpoints: self.etcd.endpoints.clone(),
            detail: format!("lease keepalive: {}", causes(&e)),
        };
        if self.stream.is_none() {
            let mut c = self.etcd.client.clone();
            self.stream = Some(c.lease_keep_alive(self.lease.0).await.map_err(err)?);
        }
        let (keeper, stream) = self.stream.as_mut().expect("opened above");
        keeper.keep_alive().await.map_err(err)?;
        match stream.message().await.map_err(err)? {
            Some(r) => Ok(Duration::from_secs(r.ttl().max(0) as u64)),
            None => Err(LeaseError::Etcd {
                endpoints: self.etcd.endpoints.clone(),
                detail: "keepalive stream ended".into(),
            }),
        }
    }
}
