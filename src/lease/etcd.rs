//! etcd requests (the guard's; the agent's and `hamaster status`'s reads and clean-up): grant,
//! acquire in one transaction, verify, keep alive, watch, release. One client per endpoint. Requests go to the member that answered last; the first
//! request, and the first after a failure, race a status request on all members and go to the
//! first that answers, so a silent member costs nothing wherever it stands in the list (a
//! single balanced channel kept sending to a dead member; trying members in their configured
//! order waited out each silent one). Every attempt is bounded; errors carry the endpoint and
//! the full cause chain.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, EventType, Identity,
    LeaseKeepAliveStream, LeaseKeeper, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse,
    WatchOptions, WatchStream,
};

use super::clock::boottime;
use super::{EtcdConfig, LeaseId};
use crate::causes::causes;
use crate::params::master as p;
use crate::pem::{self, PemKind};

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(transparent)]
    Pem(#[from] crate::pem::PemError),
    #[error("etcd unreachable: {op}: {detail}")]
    Etcd { op: &'static str, detail: String },
    /// etcd answered, and refused the request's user (authentication, a permission).
    #[error("etcd refused {op}: {detail}")]
    Refused { op: &'static str, detail: String },
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
    /// We created the key; `token` is its create revision (and the failsafe record's mod
    /// revision, when it was written with it).
    Won {
        token: i64,
    },
    Held(Holder),
    /// Our key is free, but the legacy key (`super::legacy_leader_key`) is held: a master of
    /// a hamaster from before the cluster's name was in the key.
    LegacyHeld(Holder),
    /// The key is free, but the failsafe record changed since it was read: read it again.
    RecordChanged,
}

/// The failsafe record as read: its value (None: absent) and its mod revision (0: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRead {
    pub value: Option<Vec<u8>>,
    pub revision: i64,
}

/// What the key's transaction does with the failsafe record: it must still be as read
/// (`seen`, its mod revision; 0: absent), and is then replaced by `ours`, or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordTake {
    pub key: String,
    pub seen: i64,
    pub ours: Option<String>,
    /// The seen mark (`super::seen_key`) and its value, written with the key.
    pub mark: (String, String),
}

/// What the retake came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retake {
    /// The key is ours again; its new create revision.
    Won { token: i64 },
    /// The key carries this lease.
    Taken(LeaseId),
    /// The key is free, but the failsafe record is not as we left it.
    RecordChanged,
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

/// Each etcd member's endpoint and its status, or why it did not answer.
pub type MemberAnswers = Vec<(String, Result<MemberStatus, String>)>;

/// What one member's status says: the release it runs, its database's size, its quota (etcd
/// 3.6 and later say it), and the alarms it reports (NOSPACE, CORRUPT).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberStatus {
    pub version: String,
    pub db_size: u64,
    pub quota: Option<u64>,
    pub alarms: Vec<String>,
}

impl MemberStatus {
    /// From a Status answer: its errors name the alarms as "memberID:N alarm:NOSPACE".
    fn of(r: &etcd_client::StatusResponse) -> MemberStatus {
        MemberStatus {
            version: r.version().to_string(),
            db_size: r.db_size().max(0) as u64,
            quota: (r.db_size_quota() > 0).then(|| r.db_size_quota() as u64),
            alarms: alarms_in(r.errors()),
        }
    }
}

/// The alarms a Status answer's errors name ("memberID:N alarm:NOSPACE"), each once.
pub fn alarms_in(errors: &[String]) -> Vec<String> {
    let mut alarms: Vec<String> = errors
        .iter()
        .filter_map(|e| e.split("alarm:").nth(1))
        .filter_map(|a| a.split_whitespace().next())
        .map(String::from)
        .collect();
    alarms.sort();
    alarms.dedup();
    alarms
}

#[derive(Clone)]
pub struct Etcd {
    /// The configured endpoints, then the members learned from etcd's member list.
    members: Arc<RwLock<Vec<Member>>>,
    /// The options every member's client is made with (new TLS files: `reload_tls`).
    opts: Arc<RwLock<ConnectOptions>>,
    /// The configuration, for its TLS files (another one: `reconnect`).
    cfg: Arc<RwLock<Arc<EtcdConfig>>>,
    tls_seen: Arc<Mutex<TlsSeen>>,
    /// The etcd cluster's id, from the first status answered (0: none yet): a member that
    /// names another is never picked, and `reconnect` takes only endpoints of this cluster.
    cluster_id: Arc<AtomicU64>,
    /// Held by whatever replaces the clients (`reconnect`, `reload_tls`): one at a time.
    swapping: Arc<tokio::sync::Mutex<()>>,
    /// Counts the replacements: members learned for an older set are not added to a newer.
    generation: Arc<AtomicU64>,
    /// Whether the member list has been read since the last pick.
    learned: Arc<AtomicBool>,
    current: Arc<AtomicUsize>,
    /// Whether `current` answered last; false before the first request and after a failure.
    picked: Arc<AtomicBool>,
    timeout: Duration,
    /// etcd_user and its password when etcd authentication is on.
    creds: Arc<RwLock<Option<(String, String)>>>,
}

/// One member's client. Whether it has authenticated (etcd_user) is the client's own: a client
/// made anew (TLS files renewed) authenticates again, whatever an older client of the same
/// endpoint did; etcd-client renews an expired token by itself once it has one.
#[derive(Clone)]
struct Member {
    endpoint: String,
    client: Client,
    authed: Arc<AtomicBool>,
}

impl Member {
    fn new(endpoint: String, client: Client) -> Member {
        Member {
            endpoint,
            client,
            authed: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// An endpoint as etcd and the configuration may spell it: no trailing slash.
fn normalise(url: &str) -> String {
    url.trim().trim_end_matches('/').to_string()
}

/// The IP address in a URL such as `https://192.0.2.21:2379` or `http://[2001:db8::1]:2379`.
fn url_host(url: &str) -> Option<std::net::IpAddr> {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split('/').next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next()?.parse().ok();
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .parse()
        .ok()
}

/// How etcd refused a request's user — an answer, not an outage — told once, here, by the
/// gRPC status code and etcd's own description of the error, the way etcd's Go client tells
/// them (api/v3rpc/rpctypes: each error is one status with a fixed message, and
/// `rpctypes.Error` maps the message back to it). Whatever else fails is an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Authentication is on and the request carried no user (ErrGRPCUserEmpty).
    UserEmpty,
    /// No such user, or not its password (ErrGRPCAuthFailed).
    AuthFailed,
    /// The user's role lacks the permission (ErrGRPCPermissionDenied).
    PermissionDenied,
    /// The client's token is no longer good: expired or gone (ErrGRPCInvalidAuthToken), or
    /// issued before a change of users or roles (ErrGRPCAuthOldRevision).
    StaleToken,
}

/// gRPC's status codes that etcd's refusals carry.
const GRPC_INVALID_ARGUMENT: i32 = 3;
const GRPC_PERMISSION_DENIED: i32 = 7;
const GRPC_UNAUTHENTICATED: i32 = 16;

impl Refusal {
    fn of(e: &etcd_client::Error) -> Option<Refusal> {
        let etcd_client::Error::GRpcStatus(s) = e else {
            return None;
        };
        match (i32::from(s.code()), s.message()) {
            (GRPC_PERMISSION_DENIED, _) => Some(Refusal::PermissionDenied),
            (GRPC_UNAUTHENTICATED, _) => Some(Refusal::StaleToken),
            (GRPC_INVALID_ARGUMENT, "etcdserver: user name is empty") => Some(Refusal::UserEmpty),
            (
                GRPC_INVALID_ARGUMENT,
                "etcdserver: authentication failed, invalid user ID or password",
            ) => Some(Refusal::AuthFailed),
            (GRPC_INVALID_ARGUMENT, "etcdserver: revision of auth store is old") => {
                Some(Refusal::StaleToken)
            }
            _ => None,
        }
    }

    /// etcd refused this user: another member would refuse the same.
    fn is_final(self) -> bool {
        !matches!(self, Refusal::StaleToken)
    }

    /// A guard with credentials authenticates again, the password read anew: etcd-client
    /// renews only an expired token, and with the password it was given.
    fn wants_new_token(self) -> bool {
        !matches!(self, Refusal::PermissionDenied)
    }
}

/// The errors of a call as a refusal when the last was one: an answer, not an outage — the
/// member stays the current one, and another would refuse the same.
fn refused(op: &'static str, errors: &[(String, Option<Refusal>)]) -> Option<LeaseError> {
    errors
        .last()
        .is_some_and(|(_, r)| r.is_some_and(Refusal::is_final))
        .then(|| LeaseError::Refused {
            op,
            detail: joined(errors),
        })
}

fn joined(errors: &[(String, Option<Refusal>)]) -> String {
    errors
        .iter()
        .map(|(e, _)| e.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads and checks the TLS files named in the configuration.
pub fn tls_options(cfg: &EtcdConfig) -> Result<Option<TlsOptions>, LeaseError> {
    Ok(tls_files(cfg)?.map(|(_, tls)| tls))
}

/// The TLS files' contents as read (to tell a changed file from the one in use), and the
/// options made of them; None without https.
fn tls_files(cfg: &EtcdConfig) -> Result<Option<(Vec<u8>, TlsOptions)>, LeaseError> {
    if !cfg.tls {
        return Ok(None);
    }
    let mut read = Vec::new();
    let mut tls = TlsOptions::new();
    if let Some(path) = &cfg.cacert {
        let pem = pem::read(&p::ETCD_CACERT, path, PemKind::Certificates)?;
        read.extend_from_slice(&pem);
        tls = tls.ca_certificate(Certificate::from_pem(pem));
    }
    read.push(0);
    if let (Some(cert), Some(key)) = (&cfg.cert, &cfg.key) {
        let cert_pem = pem::read(&p::ETCD_CERT, cert, PemKind::Certificates)?;
        let key_pem = pem::read(&p::ETCD_KEY, key, PemKind::PrivateKey)?;
        read.extend_from_slice(&cert_pem);
        read.push(0);
        read.extend_from_slice(&key_pem);
        tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
    }
    Ok(Some((read, tls)))
}

/// What `Etcd::reload_tls` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsReload {
    /// The files hold what is in use (or etcd is not reached over https).
    Unchanged,
    /// New contents, accepted by a member: every connection from now on uses them.
    Reloaded,
    /// New contents that cannot be used (unreadable, malformed, or refused by every member):
    /// the ones in use are kept. Said once per content.
    Refused(String),
    /// The same unusable contents as last time.
    StillRefused,
}

/// The TLS contents in use, and the last new ones found unusable.
#[derive(Default)]
struct TlsSeen {
    in_use: Vec<u8>,
    refused: Option<Vec<u8>>,
}

/// etcd_user and the password in etcd_password_file, when etcd authentication is configured.
pub fn credentials(cfg: &EtcdConfig) -> Result<Option<(String, String)>, LeaseError> {
    let Some(auth) = &cfg.auth else {
        return Ok(None);
    };
    let password = pem::password(&p::ETCD_PASSWORD_FILE, &auth.password_file)?;
    Ok(Some((auth.user.clone(), password)))
}

/// The first of a race of requests (one per member, `(index, outcome)`) to succeed, within
/// `timeout`; dropping the race aborts the ones still waiting on silent members. Err says
/// what each of `entrants` (index, endpoint) answered, or that it did not.
async fn first_to_answer(
    mut race: tokio::task::JoinSet<(usize, Result<(), String>)>,
    entrants: &[(usize, &str)],
    timeout: Duration,
) -> Result<usize, String> {
    let mut failed: Vec<(usize, String)> = Vec::new();
    let winner = tokio::time::timeout(timeout, async {
        while let Some(r) = race.join_next().await {
            match r {
                Ok((i, Ok(()))) => return Some(i),
                Ok((i, Err(e))) => failed.push((i, e)),
                Err(_) => {}
            }
        }
        None
    })
    .await;
    drop(race);
    if let Ok(Some(i)) = winner {
        return Ok(i);
    }
    let why: Vec<String> = entrants
        .iter()
        .map(|(i, endpoint)| match failed.iter().find(|f| f.0 == *i) {
            Some((_, e)) => format!("{endpoint}: {e}"),
            None => format!("{endpoint}: no answer within {} ms", timeout.as_millis()),
        })
        .collect();
    Err(why.join("; "))
}

/// A lease as granted; see `Etcd::grant`.
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    pub lease: LeaseId,
    pub ttl: Duration,
    pub sent: Duration,
}

impl Etcd {
    /// Prepares one client per endpoint; connections are made by the first requests.
    /// `timeout` bounds every attempt on one member.
    pub async fn connect(cfg: &EtcdConfig, timeout: Duration) -> Result<Etcd, LeaseError> {
        let Prepared {
            creds,
            opts,
            tls,
            members,
        } = prepare(cfg, timeout).await?;
        let seen = TlsSeen {
            in_use: tls,
            refused: None,
        };
        Ok(Etcd {
            members: Arc::new(RwLock::new(members)),
            opts: Arc::new(RwLock::new(opts)),
            cfg: Arc::new(RwLock::new(Arc::new(cfg.clone()))),
            tls_seen: Arc::new(Mutex::new(seen)),
            cluster_id: Arc::new(AtomicU64::new(0)),
            swapping: Arc::default(),
            generation: Arc::new(AtomicU64::new(0)),
            learned: Arc::new(AtomicBool::new(false)),
            current: Arc::new(AtomicUsize::new(0)),
            picked: Arc::new(AtomicBool::new(false)),
            timeout,
            creds: Arc::new(RwLock::new(creds)),
        })
    }

    /// The configuration in use.
    fn cfg(&self) -> Arc<EtcdConfig> {
        self.cfg.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// etcd_user and its password as read when the configuration was taken.
    fn creds(&self) -> Option<(String, String)> {
        self.creds.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The endpoints in use (etcd_endpoints as configured; `reconnect` replaces them).
    pub fn endpoints(&self) -> Vec<String> {
        self.cfg().endpoints.clone()
    }

    /// Another etcd_endpoints, TLS files or etcd authentication (a reload: a member
    /// replaced, certificates moved, a user changed), for the same etcd cluster and the same
    /// lease: the new endpoints' clients are made, a race among them must be won by a member
    /// that answers a status (authenticated with the new user, when there is one) within the
    /// attempt timeout and names the cluster this client has talked to so far, and only then
    /// do they replace the old ones, for every request and stream opened from then on
    /// (streams already open go on over their connection until it ends, as after
    /// `reload_tls`). Err says why, and leaves everything as it was: another cluster's
    /// members, none answering, files that cannot be read.
    pub async fn reconnect(&self, cfg: &EtcdConfig, key: &str) -> Result<(), String> {
        let _one = self.swapping.lock().await;
        let known = match self.cluster_id.load(Ordering::Relaxed) {
            0 => {
                // Nothing answered yet this round: the members in use tell which cluster.
                self.pick_live(None).await.map_err(|why| {
                    format!(
                        "the etcd members in use do not answer, so the new endpoints cannot be \
                         shown to belong to the same etcd cluster: {why}"
                    )
                })?;
                self.cluster_id.load(Ordering::Relaxed)
            }
            id => id,
        };
        let Prepared {
            creds,
            opts,
            tls,
            members: fresh,
        } = prepare(cfg, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        if known == 0 {
            return Err("the etcd cluster in use did not name itself: reload again".into());
        }
        let accept = move |id: u64| match id {
            id if id == known => Ok(()),
            id => Err(format!(
                "a member of etcd cluster {id:x}, not of {known:x}, the one this lease lives in"
            )),
        };
        // The leader key read (keys only), not a status: etcd checks a user's permissions on
        // reads, never on a status.
        let i = self
            .race_fresh(&fresh, creds.clone(), Some(key.to_string()), accept)
            .await
            .map_err(|why| format!("no new etcd endpoint is usable: {why}"))?;
        *self.cfg.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(cfg.clone());
        *self.creds.write().unwrap_or_else(|e| e.into_inner()) = creds;
        self.adopt(fresh, i, opts, tls);
        Ok(())
    }
}

/// What a configuration makes: its credentials, the options (with its TLS files' contents as
/// read), and one client per endpoint.
struct Prepared {
    creds: Option<(String, String)>,
    opts: ConnectOptions,
    tls: Vec<u8>,
    members: Vec<Member>,
}

/// `cfg`'s credentials, options and clients, for `connect` and `reconnect` alike. The user is
/// not in the options: etcd-client would authenticate in `connect`, that is wait on each
/// member, silent ones too; each member's client authenticates when it is first used instead
/// (`ready`).
async fn prepare(cfg: &EtcdConfig, timeout: Duration) -> Result<Prepared, LeaseError> {
    let creds = credentials(cfg)?;
    let mut opts = options(timeout);
    let mut tls = Vec::new();
    if let Some((read, options)) = tls_files(cfg)? {
        opts = opts.with_tls(options);
        tls = read;
    }
    let members = clients(&cfg.endpoints, &opts).await?;
    Ok(Prepared {
        creds,
        opts,
        tls,
        members,
    })
}

/// The options every member's client is made with, but TLS.
fn options(timeout: Duration) -> ConnectOptions {
    // tonic's TLS needs a process-wide crypto provider; ring is our only one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ConnectOptions::new()
        .with_connect_timeout(timeout)
        // HTTP/2 pings find a dead member under an open stream (the key watch, the
        // lease keepalive); connections without a stream need none: every request is
        // bounded by `timeout` anyway, and pings on every member's connection each second
        // only woke an idle guard.
        .with_keep_alive(Duration::from_secs(2), timeout)
        .with_keep_alive_while_idle(false)
        // A member cut off from its quorum must refuse, not answer from its stale state
        // (requests, watches and keepalive streams alike).
        .with_require_leader(true)
        // With etcd authentication, a token that expired (an idle guard: a simple token
        // lives 5 min from its last use) is renewed and the request sent again.
        .with_auto_token_refresh(true)
}

/// One client per endpoint, made with `opts` (connections are made by the first requests).
async fn clients(endpoints: &[String], opts: &ConnectOptions) -> Result<Vec<Member>, LeaseError> {
    let mut members = Vec::new();
    for e in endpoints {
        let client = Client::connect([e.as_str()], Some(opts.clone()))
            .await
            .map_err(|err| LeaseError::Etcd {
                op: "connect",
                detail: format!("{e}: {}", causes(&err)),
            })?;
        members.push(Member::new(normalise(e), client));
    }
    Ok(members)
}

impl Etcd {
    /// Reads the TLS files again (etcd_cacert, etcd_cert, etcd_key: a certificate renewed in
    /// place). New contents are tried first — a member must accept a connection made with
    /// them (a handshake and a status request, or an Authenticate with etcd_user) within the
    /// attempt timeout — and only then replace the clients: every request and stream opened
    /// from then on uses them, while streams already open (the keepalive, the watch) go on
    /// over their connection until it ends. Unusable contents leave everything as it is.
    pub async fn reload_tls(&self) -> TlsReload {
        let _one = self.swapping.lock().await;
        let read = match tls_files(&self.cfg()) {
            Ok(None) => return TlsReload::Unchanged,
            Ok(Some(r)) => r,
            Err(e) => {
                // The file as it is (half-written, unreadable): no contents to compare.
                return self.refuse(Vec::new(), e.to_string());
            }
        };
        let (contents, tls) = read;
        {
            let seen = self.tls_seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.in_use == contents {
                return TlsReload::Unchanged;
            }
            if seen.refused.as_ref() == Some(&contents) {
                return TlsReload::StillRefused;
            }
        }
        let opts = self
            .opts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .with_tls(tls);
        let mut fresh = Vec::new();
        for Member { endpoint, .. } in self.snapshot() {
            match Client::connect([endpoint.as_str()], Some(opts.clone())).await {
                Ok(c) => fresh.push(Member::new(endpoint, c)),
                Err(e) => return self.refuse(contents, format!("{endpoint}: {}", causes(&e))),
            }
        }
        // One member that accepts them is enough: a race, as pick_live's.
        let known = self.cluster_id.load(Ordering::Relaxed);
        let same = move |id: u64| match known == 0 || id == known {
            true => Ok(()),
            false => Err(format!("a member of etcd cluster {id:x}, not of {known:x}")),
        };
        match self.race_fresh(&fresh, self.creds_now(), None, same).await {
            Ok(i) => self.adopt(fresh, i, opts, contents),
            Err(why) => {
                return self.refuse(contents, format!("no etcd member accepts them: {why}"))
            }
        }
        TlsReload::Reloaded
    }

    /// A race among clients not in use yet: each authenticates with `creds` (when there are
    /// any), then reads `probe` (keys only: the user's read permission on it is checked) or,
    /// without one, asks for its member's status; the first whose cluster id `accept` takes
    /// wins, within the attempt timeout. Err says what each answered.
    async fn race_fresh(
        &self,
        fresh: &[Member],
        creds: Option<(String, String)>,
        probe: Option<String>,
        accept: impl Fn(u64) -> Result<(), String> + Clone + Send + 'static,
    ) -> Result<usize, String> {
        let mut race = tokio::task::JoinSet::new();
        for (i, m) in fresh.iter().enumerate() {
            let (mut c, creds, accept) = (m.client.clone(), creds.clone(), accept.clone());
            let probe = probe.clone();
            race.spawn(async move {
                let answer = async {
                    if creds.is_some() {
                        c.update_user(creds).await?;
                    }
                    Ok::<u64, etcd_client::Error>(match probe {
                        Some(key) => {
                            let only = etcd_client::GetOptions::new().with_keys_only();
                            let r = c.get(key, Some(only)).await?;
                            r.header().map_or(0, |h| h.cluster_id())
                        }
                        None => c.status().await?.header().map_or(0, |h| h.cluster_id()),
                    })
                };
                let answer = match answer.await {
                    Ok(id) => accept(id),
                    Err(e) => Err(causes(&e)),
                };
                (i, answer)
            });
        }
        let entrants: Vec<(usize, &str)> = fresh
            .iter()
            .enumerate()
            .map(|(i, m)| (i, m.endpoint.as_str()))
            .collect();
        first_to_answer(race, &entrants, self.timeout).await
    }

    /// `fresh` replaces the clients, made with `opts` from the TLS contents `tls`; its member
    /// `winner`, which answered (authenticated, when there is a user), is the current one.
    fn adopt(&self, fresh: Vec<Member>, winner: usize, opts: ConnectOptions, tls: Vec<u8>) {
        fresh[winner]
            .authed
            .store(self.creds().is_some(), Ordering::Relaxed);
        *self.members.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        *self.opts.write().unwrap_or_else(|e| e.into_inner()) = opts;
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.current.store(winner, Ordering::Relaxed);
        self.picked.store(true, Ordering::Relaxed);
        // Members learned meanwhile were not in the snapshot: the next pick learns them again.
        self.learned.store(false, Ordering::Relaxed);
        let mut seen = self.tls_seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.in_use = tls;
        seen.refused = None;
    }

    /// New TLS contents that cannot be used: said the first time, silent after.
    fn refuse(&self, contents: Vec<u8>, why: String) -> TlsReload {
        let mut seen = self.tls_seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.refused.as_ref() == Some(&contents) {
            return TlsReload::StillRefused;
        }
        seen.refused = Some(contents);
        TlsReload::Refused(why)
    }

    /// The member's client, authenticated first if etcd authentication is configured and it
    /// has not yet been (one Authenticate request; the client then carries the token).
    async fn ready(&self, m: &Member) -> Result<Client, etcd_client::Error> {
        let mut client = m.client.clone();
        if self.creds().is_none() || m.authed.load(Ordering::Relaxed) {
            return Ok(client);
        }
        client.update_user(self.creds_now()).await?;
        m.authed.store(true, Ordering::Relaxed);
        Ok(client)
    }

    /// etcd_user and its password as etcd_password_file holds it now (a password changed in
    /// etcd and in the file is used from the next authentication on); the one read at start
    /// when the file cannot be read now.
    fn creds_now(&self) -> Option<(String, String)> {
        credentials(&self.cfg())
            .ok()
            .flatten()
            .or_else(|| self.creds())
    }

    /// `explain`, the member's endpoint before it.
    fn explained(
        &self,
        endpoint: &str,
        op: &str,
        e: &etcd_client::Error,
    ) -> (String, Option<Refusal>) {
        let (text, refusal) = self.explain(op, e);
        (format!("{endpoint}: {text}"), refusal)
    }

    /// An error of etcd's, with what to do about the ones authentication causes (etcd
    /// answered, but refused this user, or the anonymous one), and the refusal it is.
    fn explain(&self, op: &str, e: &etcd_client::Error) -> (String, Option<Refusal>) {
        let text = causes(e);
        let refusal = Refusal::of(e);
        let hint = match refusal {
            Some(Refusal::UserEmpty) => {
                "etcd has authentication enabled: set etcd_user and etcd_password_file".to_string()
            }
            Some(Refusal::AuthFailed) => match &self.creds() {
                Some((user, _)) => format!(
                    "etcd_user=\"{user}\" does not exist or etcd_password_file does not hold its \
                     password"
                ),
                None => "etcd refused the credentials".to_string(),
            },
            Some(Refusal::PermissionDenied) => {
                let creds = self.creds();
                let user = creds.as_ref().map_or("(none)", |c| c.0.as_str());
                if op == "move leader" {
                    format!(
                        "etcd user {user} may not move etcd's leader (set etcd_move_leader=false)"
                    )
                } else {
                    format!(
                        "etcd user {user} lacks the permission for {op}: its role needs readwrite \
                         on the key prefix {}/ (docs/etcd-auth.md)",
                        self.cfg().prefix.trim_end_matches('/')
                    )
                }
            }
            Some(Refusal::StaleToken) | None => return (text, refusal),
        };
        (format!("{text} — {hint}"), refusal)
    }

    /// Runs `f` on the current member, then on each other one, until one answers.
    async fn call<T, F, Fut>(&self, op: &'static str, f: F) -> Result<T, LeaseError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        Ok(self.call_timed(op, f).await?.0)
    }

    /// As `call`, and also tells when (boot clock) the request that succeeded was sent:
    /// time spent finding a member that answers is not counted against it.
    ///
    /// At most two attempts: on the member that answered last (the winner of a race among
    /// all of them, the first time), then on the winner of a race among the others. A silent
    /// member (a dead host: nothing answers, nothing is refused) never costs a wait of its
    /// own while another answers: the races are won in one round trip by a live member,
    /// wherever the silent one stands in etcd_endpoints.
    async fn call_timed<T, F, Fut>(
        &self,
        op: &'static str,
        f: F,
    ) -> Result<(T, Duration), LeaseError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut errors: Vec<(String, Option<Refusal>)> = Vec::new();
        for attempt in 0..2 {
            if attempt > 0 || !self.picked.load(Ordering::Relaxed) {
                let failed = (attempt > 0).then(|| self.current.load(Ordering::Relaxed));
                if let Err(e) = self.pick_live(failed).await {
                    errors.push((e, None));
                    break;
                }
                // In the background: it must not delay the request that waits for it.
                let me = self.clone();
                tokio::spawn(async move { me.learn_members().await });
            }
            let m = self.member();
            let endpoint = m.endpoint.clone();
            let client = match tokio::time::timeout(self.timeout, self.ready(&m)).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    errors.push(self.explained(&endpoint, op, &e));
                    if let Some(refused) = refused(op, &errors) {
                        return Err(refused);
                    }
                    continue;
                }
                Err(_) => {
                    errors.push((
                        format!(
                            "{endpoint}: no answer to Authenticate within {} ms",
                            self.timeout.as_millis()
                        ),
                        None,
                    ));
                    continue;
                }
            };
            let sent = boottime();
            let mut answer = tokio::time::timeout(self.timeout, f(client)).await;
            if let Ok(Err(e)) = &answer {
                if self.creds().is_some() && Refusal::of(e).is_some_and(Refusal::wants_new_token) {
                    // etcd no longer takes this client's token (etcd-client renews only an
                    // expired one, and with the password it was given: AuthFailed after a
                    // change of password): authenticate again, the password read anew, and
                    // send once more to the same member.
                    m.authed.store(false, Ordering::Relaxed);
                    answer = tokio::time::timeout(self.timeout, async {
                        let c = self.ready(&m).await?;
                        f(c).await
                    })
                    .await;
                }
            }
            match answer {
                Ok(Ok(v)) => return Ok((v, sent)),
                Ok(Err(e)) => errors.push(self.explained(&endpoint, op, &e)),
                Err(_) => errors.push((
                    format!(
                        "{endpoint}: no answer within {} ms",
                        self.timeout.as_millis()
                    ),
                    None,
                )),
            }
            if let Some(refused) = refused(op, &errors) {
                return Err(refused);
            }
        }
        self.unpick();
        Err(refused(op, &errors).unwrap_or_else(|| LeaseError::Etcd {
            op,
            detail: joined(&errors),
        }))
    }

    /// Races a status request (which, like every request, requires a leader) on every member
    /// but `except`, and makes the first to answer the current member. Bounded by the
    /// attempt timeout.
    pub async fn pick_live(&self, except: Option<usize>) -> Result<usize, String> {
        let members = self.snapshot();
        let mut race = tokio::task::JoinSet::new();
        for (i, m) in members.iter().enumerate() {
            if Some(i) != except {
                let (me, m) = (self.clone(), m.clone());
                race.spawn(async move {
                    let status = async {
                        let mut c = me.ready(&m).await?;
                        c.status().await
                    };
                    (
                        i,
                        match status.await {
                            Ok(r) => me.saw_cluster(r.header()),
                            Err(e) => Err(me.explain("status", &e).0),
                        },
                    )
                });
            }
        }
        if race.is_empty() {
            return Err("no other member to try".into());
        }
        let entrants: Vec<(usize, &str)> = members
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != except)
            .map(|(i, m)| (i, m.endpoint.as_str()))
            .collect();
        let i = first_to_answer(race, &entrants, self.timeout).await?;
        self.current.store(i, Ordering::Relaxed);
        self.picked.store(true, Ordering::Relaxed);
        Ok(i)
    }

    /// Keeps the first cluster id an answer names; Err for an answer that names another (a
    /// member of another etcd cluster among the endpoints: never the one requests go to).
    fn saw_cluster(&self, header: Option<&etcd_client::ResponseHeader>) -> Result<(), String> {
        let Some(id) = header.map(|h| h.cluster_id()).filter(|id| *id != 0) else {
            return Ok(());
        };
        match self
            .cluster_id
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(known) if known == id => Ok(()),
            Err(known) => Err(format!(
                "a member of etcd cluster {id:x}, not of {known:x}: never used"
            )),
        }
    }

    /// The current member failed: the next request races for a live one first, and reads
    /// the member list again.
    fn unpick(&self) {
        self.picked.store(false, Ordering::Relaxed);
        self.learned.store(false, Ordering::Relaxed);
    }

    fn member(&self) -> Member {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        members[self.current.load(Ordering::Relaxed) % members.len()].clone()
    }

    /// The etcd release each member runs, as its status says; members that do not answer
    /// within the attempt timeout are left out.
    pub async fn versions(&self) -> Vec<(String, String)> {
        self.member_answers()
            .await
            .into_iter()
            .filter_map(|(endpoint, answer)| Some((endpoint, answer.ok()?.version)))
            .collect()
    }

    /// Every member's status asked at once, each within the attempt timeout: its endpoint and
    /// what its status says, or why it did not answer ("no answer within N ms", a refusal).
    pub async fn member_answers(&self) -> MemberAnswers {
        let mut asks = tokio::task::JoinSet::new();
        for (i, m) in self.snapshot().into_iter().enumerate() {
            let etcd = self.clone();
            asks.spawn(async move {
                let status = async {
                    let mut c = etcd.ready(&m).await?;
                    c.status().await
                };
                let answer = match tokio::time::timeout(etcd.timeout, status).await {
                    Ok(Ok(r)) => Ok(MemberStatus::of(&r)),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {} ms", etcd.timeout.as_millis())),
                };
                (i, m.endpoint, answer)
            });
        }
        let mut answers = Vec::new();
        while let Some(done) = asks.join_next().await {
            answers.extend(done.ok());
        }
        answers.sort_by_key(|a| a.0);
        answers.into_iter().map(|(_, e, a)| (e, a)).collect()
    }

    fn snapshot(&self) -> Vec<Member> {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Adds the members etcd lists that etcd_endpoints does not name (a member added or
    /// replaced since the configuration was written, or endpoints that name only some), so
    /// that a request can go to any member of the cluster. Once per pick; errors only mean
    /// the list stays as it is.
    async fn learn_members(&self) {
        if self.learned.swap(true, Ordering::Relaxed) {
            return;
        }
        let generation = self.generation.load(Ordering::Relaxed);
        let m = self.member();
        let list = async {
            let mut c = self.ready(&m).await?;
            c.member_list().await
        };
        let listed = match tokio::time::timeout(self.timeout, list).await {
            Ok(Ok(r)) => r,
            _ => return,
        };
        let known: Vec<String> = self.snapshot().into_iter().map(|m| m.endpoint).collect();
        for m in listed.members().iter().filter(|m| !m.is_learner()) {
            for url in m.client_urls().iter().map(|u| normalise(u)) {
                if known.contains(&url) {
                    continue;
                }
                let opts = self.opts.read().unwrap_or_else(|e| e.into_inner()).clone();
                if let Ok(c) = Client::connect([url.as_str()], Some(opts)).await {
                    let mut members = self.members.write().unwrap_or_else(|e| e.into_inner());
                    // The clients were replaced meanwhile: the next pick learns them anew.
                    if self.generation.load(Ordering::Relaxed) != generation {
                        return;
                    }
                    log::info!(
                        "etcd: learned member {} at {url} from the member list",
                        m.name()
                    );
                    members.push(Member::new(url, c));
                }
            }
        }
    }

    /// The nodes that hold a leader key under `prefix` now (the masters of every resource of
    /// this prefix), from one range request.
    pub async fn leading_nodes(&self, prefix: &str) -> Result<Vec<String>, LeaseError> {
        let p = format!("{}/", prefix.trim_end_matches('/'));
        let r = self
            .call("list leader keys", |mut c| {
                let p = p.clone();
                async move {
                    c.get(p, Some(etcd_client::GetOptions::new().with_prefix()))
                        .await
                }
            })
            .await?;
        let mut nodes: Vec<String> = r
            .kvs()
            .iter()
            .filter(|kv| {
                let key = String::from_utf8_lossy(kv.key());
                key.ends_with(super::LEADER_SUFFIX) && super::resource_of(prefix, &key).is_some()
            })
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
            .collect();
        nodes.sort();
        nodes.dedup();
        Ok(nodes)
    }

    /// Moves etcd's raft leadership away from this node when this node hosts it: a crash of
    /// the node would otherwise cost an election on top of the failover, and the new master
    /// a full lease TTL. A member is on this node when its name is `node` (etcd members are
    /// usually named after their host) or one of its URLs names an address in `local`.
    /// Never to a member named after a node in `masters` (the nodes that lead some resource):
    /// two masters on two nodes would otherwise pass the leadership back and forth; where
    /// every other member hosts a master, the leadership stays. Returns the member it moved
    /// leadership to, if it did.
    pub async fn move_leader_off(
        &self,
        node: &str,
        local: &[std::net::IpAddr],
        masters: &[String],
    ) -> Result<Option<String>, LeaseError> {
        let status = self
            .call("status", |mut c| async move { c.status().await })
            .await?;
        let leader = status.leader();
        let list = self
            .call("member list", |mut c| async move { c.member_list().await })
            .await?;
        let is_local = |m: &etcd_client::Member| {
            m.name() == node
                || m.client_urls()
                    .iter()
                    .chain(m.peer_urls())
                    .filter_map(|u| url_host(u))
                    .any(|ip| !ip.is_loopback() && local.contains(&ip))
        };
        let Some(current) = list.members().iter().find(|m| m.id() == leader) else {
            return Ok(None);
        };
        if !is_local(current) {
            return Ok(None);
        }
        // Our client for one of a member's URLs.
        let clients = self.snapshot();
        let client_of = |m: &etcd_client::Member| {
            let urls: Vec<String> = m.client_urls().iter().map(|u| normalise(u)).collect();
            clients.iter().find(|c| urls.contains(&c.endpoint)).cloned()
        };
        // Only to a member that answers now: while a transfer is pending the leader drops
        // every proposal (our renewals too), for up to an election timeout if the transferee
        // is dead.
        let mut target = None;
        for m in list
            .members()
            .iter()
            .filter(|m| !m.is_learner() && !is_local(m) && !masters.iter().any(|n| n == m.name()))
        {
            let Some(member) = client_of(m) else {
                continue;
            };
            let status = async {
                let mut c = self.ready(&member).await?;
                c.status().await
            };
            if let Ok(Ok(_)) = tokio::time::timeout(self.timeout, status).await {
                target = Some(m);
                break;
            }
        }
        let Some(target) = target else {
            return Ok(None);
        };
        // MoveLeader must reach the leader itself.
        let Some(leader_member) = client_of(current) else {
            return Ok(None);
        };
        self.ask_to_move(&leader_member, target).await
    }

    /// MoveLeader to `target`, asked of the leader `leader_member`: the new leader's name.
    async fn ask_to_move(
        &self,
        leader_member: &Member,
        target: &etcd_client::Member,
    ) -> Result<Option<String>, LeaseError> {
        let endpoint = leader_member.endpoint.clone();
        let id = target.id();
        let moved = async {
            let mut c = self.ready(leader_member).await?;
            c.move_leader(id).await
        };
        match tokio::time::timeout(self.timeout, moved).await {
            Ok(Ok(_)) => Ok(Some(target.name().to_string())),
            Ok(Err(e)) => match self.explained(&endpoint, "move leader", &e) {
                (detail, Some(r)) if r.is_final() => Err(LeaseError::Refused {
                    op: "move leader",
                    detail,
                }),
                (detail, _) => Err(LeaseError::Etcd {
                    op: "move leader",
                    detail,
                }),
            },
            Err(_) => Err(LeaseError::Etcd {
                op: "move leader",
                detail: format!(
                    "{endpoint}: no answer within {} ms",
                    self.timeout.as_millis()
                ),
            }),
        }
    }

    /// A new lease: its id, the TTL etcd granted, and when (boot clock) the request that
    /// created it was sent: the lease lives at etcd until at least that moment plus the TTL.
    pub async fn grant(&self, ttl: Duration) -> Result<Grant, LeaseError> {
        let secs = ttl.as_secs() as i64;
        let (r, sent) = self
            .call_timed("lease grant", |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await?;
        Ok(Grant {
            lease: LeaseId(r.id()),
            ttl: Duration::from_secs(r.ttl().max(0) as u64),
            sent,
        })
    }

    /// Creates the key under our lease if nobody holds it nor the `legacy` key, in one
    /// transaction; else reads the holder. Safe to retry: a retried transaction that finds our
    /// own lease on the key won.
    pub async fn try_acquire(
        &self,
        key: &str,
        legacy: &str,
        node: &str,
        lease: LeaseId,
        record: &RecordTake,
    ) -> Result<Acquire, LeaseError> {
        let put = TxnOp::put(key, node, Some(PutOptions::new().with_lease(lease.0)));
        let with_record = match &record.ours {
            Some(value) => TxnOp::put(record.key.as_str(), value.as_str(), None),
            None => TxnOp::delete(record.key.as_str(), None),
        };
        let txn = Txn::new()
            .when([
                Compare::create_revision(key, CompareOp::Equal, 0),
                Compare::create_revision(legacy, CompareOp::Equal, 0),
                Compare::mod_revision(record.key.as_str(), CompareOp::Equal, record.seen),
            ])
            .and_then([
                put,
                with_record,
                TxnOp::put(record.mark.0.as_str(), record.mark.1.as_str(), None),
            ])
            .or_else([TxnOp::get(key, None), TxnOp::get(legacy, None)]);
        let r = self
            .call("acquire transaction", |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        let revision = r.header().map_or(0, |h| h.revision());
        if r.succeeded() {
            return Ok(Acquire::Won { token: revision });
        }
        // Our key's, then the legacy key's.
        let mut reads = r.op_responses().into_iter().map(|op| match op {
            TxnOpResponse::Get(g) => g.kvs().first().cloned(),
            _ => None,
        });
        let (ours, old) = (reads.next().flatten(), reads.next().flatten());
        let holder = |kv: etcd_client::KeyValue| async move {
            let holder_lease = LeaseId(kv.lease());
            let ttl_left = self.ttl_left(holder_lease).await.ok().flatten();
            Holder {
                node: String::from_utf8_lossy(kv.value()).into_owned(),
                lease: holder_lease,
                token: kv.create_revision(),
                ttl_left,
                revision,
            }
        };
        match (ours, old) {
            (Some(kv), _) if kv.lease() == lease.0 => Ok(Acquire::Won {
                token: kv.create_revision(),
            }),
            (Some(kv), _) => Ok(Acquire::Held(holder(kv).await)),
            (None, Some(kv)) => Ok(Acquire::LegacyHeld(holder(kv).await)),
            // The keys are free: the record was what changed.
            (None, None) => Ok(Acquire::RecordChanged),
        }
    }

    /// The failsafe record: its value and mod revision.
    pub async fn read_record(&self, key: &str) -> Result<RecordRead, LeaseError> {
        let k = key.to_string();
        let r = self
            .call("get failsafe record", |mut c| {
                let k = k.clone();
                async move { c.get(k, None).await }
            })
            .await?;
        Ok(match r.kvs().first() {
            Some(kv) => RecordRead {
                value: Some(kv.value().to_vec()),
                revision: kv.mod_revision(),
            },
            None => RecordRead {
                value: None,
                revision: 0,
            },
        })
    }

    /// Takes the key back after a hold, under a new `lease`: only while it is absent and the
    /// failsafe record is still as we wrote it (`record_revision`), in one transaction.
    pub async fn retake(
        &self,
        key: &str,
        legacy: &str,
        node: &str,
        lease: LeaseId,
        record_key: &str,
        record_revision: i64,
    ) -> Result<Retake, LeaseError> {
        let txn = Txn::new()
            .when([
                Compare::create_revision(key, CompareOp::Equal, 0),
                Compare::create_revision(legacy, CompareOp::Equal, 0),
                Compare::mod_revision(record_key, CompareOp::Equal, record_revision),
            ])
            .and_then([TxnOp::put(
                key,
                node,
                Some(PutOptions::new().with_lease(lease.0)),
            )])
            .or_else([TxnOp::get(key, None), TxnOp::get(legacy, None)]);
        let r = self
            .call("retake transaction", |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        let revision = r.header().map_or(0, |h| h.revision());
        if r.succeeded() {
            return Ok(Retake::Won { token: revision });
        }
        let kv = r.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(g) => g.kvs().first().cloned(),
            _ => None,
        });
        Ok(match kv {
            // A retried transaction that finds our new lease on the key won.
            Some(kv) if kv.lease() == lease.0 => Retake::Won {
                token: kv.create_revision(),
            },
            Some(kv) => Retake::Taken(LeaseId(kv.lease())),
            None => Retake::RecordChanged,
        })
    }

    /// The key's holder, if any.
    pub async fn holder(&self, key: &str) -> Result<Option<Holder>, LeaseError> {
        let k = key.to_string();
        let r = self
            .call("get leader key", |mut c| {
                let k = k.clone();
                async move { c.get(k, None).await }
            })
            .await?;
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

    /// The keys under `prefix` (keys only, at most `limit`).
    pub async fn keys_under(&self, prefix: &str, limit: i64) -> Result<Vec<String>, LeaseError> {
        let p = prefix.to_string();
        let r = self
            .call("list keys", |mut c| {
                let p = p.clone();
                async move {
                    c.get(
                        p,
                        Some(
                            etcd_client::GetOptions::new()
                                .with_prefix()
                                .with_keys_only()
                                .with_limit(limit),
                        ),
                    )
                    .await
                }
            })
            .await?;
        Ok(r.kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
            .collect())
    }

    /// Remaining TTL of a lease; None when it no longer exists.
    pub async fn ttl_left(&self, lease: LeaseId) -> Result<Option<Duration>, LeaseError> {
        if lease.0 == 0 {
            return Ok(None);
        }
        let r = self
            .call("lease time-to-live", |mut c| async move {
                c.lease_time_to_live(lease.0, None).await
            })
            .await?;
        Ok((r.ttl() > 0).then(|| Duration::from_secs(r.ttl() as u64)))
    }

    /// Deletes the key only while it still carries our lease, with the failsafe record we
    /// wrote (`record`: its key and mod revision; it goes only while it is as we wrote it),
    /// then revokes the lease. Returns whether the key was ours and is now gone.
    pub async fn release(
        &self,
        key: &str,
        lease: LeaseId,
        record: Option<(&str, i64)>,
    ) -> Result<bool, LeaseError> {
        let key_only = Txn::new()
            .when([Compare::lease(key, CompareOp::Equal, lease.0)])
            .and_then([TxnOp::delete(key, None)]);
        let txn = match record {
            Some((rk, rev)) => Txn::new()
                .when([
                    Compare::lease(key, CompareOp::Equal, lease.0),
                    Compare::mod_revision(rk, CompareOp::Equal, rev),
                ])
                .and_then([TxnOp::delete(key, None), TxnOp::delete(rk, None)])
                .or_else([TxnOp::txn(key_only.clone())]),
            None => key_only,
        };
        let r = self
            .call("release transaction", |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        // The key went with the record, or in the nested transaction when the record was not
        // ours any more.
        let deleted = r.succeeded()
            || r.op_responses().into_iter().any(|op| match op {
                TxnOpResponse::Txn(t) => t.succeeded(),
                _ => false,
            });
        // Revoked, or already gone (expired or revoked): nothing left to release either way.
        self.revoke(lease).await.map(|_| deleted)
    }

    /// Puts `value` at `at` (no lease) only while `key` still carries `lease`, in one
    /// transaction: what a leader records beside its key (the VIP's sessions). Whether it was
    /// written.
    pub async fn put_while_held(
        &self,
        key: &str,
        lease: LeaseId,
        at: &str,
        value: Vec<u8>,
    ) -> Result<bool, LeaseError> {
        let txn = Txn::new()
            .when([Compare::lease(key, CompareOp::Equal, lease.0)])
            .and_then([TxnOp::put(at, value, None)]);
        Ok(self
            .call("record beside the leader key", |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?
            .succeeded())
    }

    /// Whether the key still carries `lease`: one transaction comparing the key's lease.
    pub async fn confirm(&self, key: &str, lease: LeaseId) -> Result<bool, LeaseError> {
        let txn = Txn::new().when([Compare::lease(key, CompareOp::Equal, lease.0)]);
        Ok(self
            .call("confirm leader key", |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?
            .succeeded())
    }

    /// Revokes `lease`: Ok(true) when etcd revoked it, Ok(false) when etcd answered that it
    /// has no such lease (expired or revoked already) — an answer, not a failure.
    pub async fn revoke(&self, lease: LeaseId) -> Result<bool, LeaseError> {
        self.call("lease revoke", |mut c| async move {
            match c.lease_revoke(lease.0).await {
                Ok(_) => Ok(true),
                Err(etcd_client::Error::GRpcStatus(s)) if i32::from(s.code()) == GRPC_NOT_FOUND => {
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// Watches the key from `revision` on.
    pub async fn watch(&self, key: &str, revision: i64) -> Result<KeyWatch, LeaseError> {
        let k = key.to_string();
        let stream = self
            .call("watch", |mut c| {
                let k = k.clone();
                async move {
                    c.watch(k, Some(WatchOptions::new().with_start_revision(revision)))
                        .await
                }
            })
            .await?;
        Ok(KeyWatch { stream })
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
}

impl KeyWatch {
    /// The next change of the key. Errors and the end of the stream are errors: the caller
    /// decides whether to watch again.
    pub async fn next(&mut self) -> Result<KeyEvent, LeaseError> {
        let err = |detail: String| LeaseError::Etcd {
            op: "watch",
            detail,
        };
        loop {
            let msg = self.stream.message().await.map_err(|e| err(causes(&e)))?;
            let Some(msg) = msg else {
                return Err(err("watch stream ended".into()));
            };
            if msg.canceled() {
                return Err(err(format!("watch canceled: {}", msg.cancel_reason())));
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

/// Lease renewals over one keepalive stream on one member, moved to the next member after
/// any failure.
pub struct KeepAlive {
    etcd: Etcd,
    lease: LeaseId,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

/// Why a renewal did not renew, as the guard machine needs to tell them apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenewError {
    /// etcd answered that the lease does not exist: as final as a TTL of 0.
    #[error("{0}: etcd says the lease does not exist")]
    LeaseNotFound(String),
    /// No answer within the attempt's time (a silent member, a stuck leader).
    #[error("{0}")]
    TimedOut(String),
    /// Refused, no leader, a broken stream: etcd could not renew now.
    #[error("{0}")]
    Failed(String),
}

impl KeepAlive {
    /// One renewal, bounded by `timeout`; returns the TTL etcd granted (zero: the lease is gone).
    /// After a failure the next renewal first races for a member that answers.
    pub async fn renew(&mut self, timeout: Duration) -> Result<Duration, RenewError> {
        let attempt = async {
            if !self.etcd.picked.load(Ordering::Relaxed) {
                self.stream = None;
                self.etcd
                    .pick_live(None)
                    .await
                    .map_err(|e| RenewError::Failed(format!("lease keepalive: {e}")))?;
            }
            let m = self.etcd.member();
            let endpoint = m.endpoint.clone();
            let client = self.etcd.ready(&m).await.map_err(|e| {
                RenewError::Failed(format!(
                    "{endpoint}: {}",
                    self.etcd.explain("lease keepalive", &e).0
                ))
            })?;
            self.renew_on(client).await.map_err(|e| match e {
                RenewError::LeaseNotFound(d) => {
                    RenewError::LeaseNotFound(format!("{endpoint}: {d}"))
                }
                RenewError::TimedOut(d) => RenewError::TimedOut(format!("{endpoint}: {d}")),
                RenewError::Failed(d) => RenewError::Failed(format!("{endpoint}: {d}")),
            })
        };
        let failed = match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(ttl)) => return Ok(ttl),
            Ok(Err(e)) => e,
            Err(_) => RenewError::TimedOut(format!(
                "{}: no answer within {} ms",
                self.etcd.member().endpoint,
                timeout.as_millis()
            )),
        };
        self.stream = None;
        self.etcd.unpick();
        Err(failed)
    }

    async fn renew_on(&mut self, mut client: Client) -> Result<Duration, RenewError> {
        let failed = |e: etcd_client::Error| RenewError::Failed(causes(&e));
        if self.stream.is_none() {
            self.stream = Some(client.lease_keep_alive(self.lease.0).await.map_err(|e| {
                match &e {
                    // Opening the stream, etcd-client says LeaseKeepAliveError only when the
                    // first reply has TTL 0 (etcd does not know the lease), or when its first
                    // request cannot go into the stream's fresh channel — whose receiver the
                    // stream holds, so it cannot fail. By the variant, never by its words.
                    etcd_client::Error::LeaseKeepAliveError(_) => {
                        RenewError::LeaseNotFound(causes(&e))
                    }
                    _ => failed(e),
                }
            })?);
        }
        let (keeper, stream) = self.stream.as_mut().expect("opened above");
        keeper.keep_alive().await.map_err(failed)?;
        match stream.message().await.map_err(failed)? {
            Some(r) => Ok(Duration::from_secs(r.ttl().max(0) as u64)),
            None => Err(RenewError::Failed("keepalive stream ended".into())),
        }
    }
}

/// gRPC's status code NOT_FOUND: etcd's answer (ErrGRPCLeaseNotFound, "etcdserver: requested
/// lease not found") to a request naming a lease it does not have.
const GRPC_NOT_FOUND: i32 = 5;

/// Whether an etcd release has the fix for etcd issue 15247 (a stuck old leader revoking
/// leases early): 3.4.30 and later 3.4, 3.5.13 and later 3.5, anything from 3.6 on. None: not
/// a version this can read.
pub fn has_lease_revoke_fix(version: &str) -> Option<bool> {
    let mut parts = version.trim().trim_start_matches('v').split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    Some(match (major, minor) {
        (3, 4) => patch >= 30,
        (3, 5) => patch >= 13,
        (3, m) => m >= 6,
        (m, _) => m > 3,
    })
}

impl crate::ocf::failure::Failure for LeaseError {
    /// A TLS file that cannot be read is this node's lack; one that holds no PEM is wrong
    /// everywhere; the rest (etcd unreachable, refused) is this node's trouble.
    fn exit(&self) -> crate::ocf::OcfExit {
        match self {
            LeaseError::Pem(e) => e.exit(),
            _ => crate::ocf::OcfExit::ErrGeneric,
        }
    }
}

#[cfg(test)]
mod version_tests {
    use super::has_lease_revoke_fix as fixed;

    #[test]
    fn the_releases_with_the_lease_revoke_fix_are_known() {
        assert_eq!(fixed("3.4.23"), Some(false), "Debian bookworm's");
        assert_eq!(fixed("3.4.30"), Some(true));
        assert_eq!(fixed("3.5.12"), Some(false));
        assert_eq!(fixed("3.5.16"), Some(true), "Debian trixie's");
        assert_eq!(fixed("3.6.0"), Some(true));
        assert_eq!(fixed("3.3.27"), Some(false));
        assert_eq!(fixed("3.5.13-rc1"), Some(true));
        assert_eq!(fixed("not a version"), None);
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;
    use tonic::{Code, Status};

    fn status(code: Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(Status::new(code, message))
    }

    #[test]
    fn etcds_refusals_are_told_by_their_status_and_etcds_own_description() {
        // Each as etcd's server makes it (api/v3rpc/rpctypes/error.go).
        for (code, message, want) in [
            (
                Code::InvalidArgument,
                "etcdserver: user name is empty",
                Refusal::UserEmpty,
            ),
            (
                Code::InvalidArgument,
                "etcdserver: authentication failed, invalid user ID or password",
                Refusal::AuthFailed,
            ),
            (
                Code::PermissionDenied,
                "etcdserver: permission denied",
                Refusal::PermissionDenied,
            ),
            (
                Code::Unauthenticated,
                "etcdserver: invalid auth token",
                Refusal::StaleToken,
            ),
            (
                Code::InvalidArgument,
                "etcdserver: revision of auth store is old",
                Refusal::StaleToken,
            ),
        ] {
            assert_eq!(Refusal::of(&status(code, message)), Some(want), "{message}");
        }
        assert!(Refusal::UserEmpty.is_final() && Refusal::AuthFailed.is_final());
        assert!(Refusal::PermissionDenied.is_final() && !Refusal::StaleToken.is_final());
        assert!(!Refusal::PermissionDenied.wants_new_token());
        assert!(Refusal::StaleToken.wants_new_token() && Refusal::AuthFailed.wants_new_token());
    }

    #[test]
    fn words_alone_decide_nothing() {
        // An outage that quotes a refusal's words is still an outage; another InvalidArgument
        // is no refusal; nor is anything that is not etcd's status.
        for e in [
            status(Code::Unavailable, "etcdserver: permission denied"),
            status(Code::Unavailable, "etcdserver: no leader"),
            status(Code::InvalidArgument, "etcdserver: key is not provided"),
            status(Code::InvalidArgument, "authentication failed"),
            etcd_client::Error::LeaseKeepAliveError("permission denied".into()),
        ] {
            assert_eq!(Refusal::of(&e), None, "{e}");
        }
    }
}
