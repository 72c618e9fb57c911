//! Parameters of `ocf:hamaster:master` (and of `hamaster takeover`/`status` config files):
//! the etcd leader lease, the master service, its health check, and the optional VIP, whose
//! parameters are the vip agent's own.

use super::{Kind, Param, Unit};

const BASE: Param = Param {
    name: "",
    kind: Kind::String,
    default: None,
    required: false,
    unique: false,
    reloadable: false,
    range: None,
    unit: None,
    shortdesc: "",
    longdesc: "",
};

pub const ETCD_ENDPOINTS: Param = Param {
    name: "etcd_endpoints",
    required: true,
    shortdesc: "etcd client URLs",
    longdesc: "Comma-separated etcd client URLs (http://192.0.2.21:2379,http://192.0.2.22:2379). \
        All of them use the same scheme; https needs etcd_cacert. Reloadable (Pacemaker 2.1+): \
        a promoted guard takes new endpoints, TLS files and authentication in place, keeping its \
        lease, key, VIP and service, once one of the new endpoints answers a read of the leader \
        key as a member of the same etcd cluster (a member replaced, docs/etcd-operations.md); \
        otherwise the guard keeps the old ones and the reload fails with the reason (Pacemaker \
        then restarts the instance by default).",
    reloadable: true,
    ..BASE
};

pub const ETCD_PREFIX: Param = Param {
    name: "etcd_prefix",
    default: Some("/hamaster"),
    shortdesc: "Key prefix in etcd",
    longdesc: "The leader key is {etcd_prefix}/{cluster_name}/{resource}/leader, where resource \
        is the resource name without a clone suffix. Its value is the holder's node name; its \
        create revision is the fencing token. Several clusters may share one etcd and one \
        etcd_prefix: the cluster's name keeps their keys apart. A master also refuses to take \
        its key while {etcd_prefix}/{resource}/leader, the key of hamaster releases before the \
        cluster's name was part of it, is held (an old master mid-upgrade).",
    ..BASE
};

pub const CLUSTER_NAME: Param = Param {
    name: "cluster_name",
    shortdesc: "The cluster's name in the leader key",
    longdesc: "The name that keeps this cluster's leader key apart from other clusters' in a \
        shared etcd ({etcd_prefix}/{cluster_name}/{resource}/leader). Default: corosync's \
        totem.cluster_name (pcs cluster setup NAME), read by every action that needs the key; \
        where corosync does not answer, promote fails on this node. The cold standby's TOML \
        (hamaster takeover, status) must name it: there is no corosync to ask. It must not \
        contain '/', white space or control characters.",
    ..BASE
};

pub const ETCD_CACERT: Param = Param {
    name: "etcd_cacert",
    shortdesc: "CA certificate for etcd (PEM)",
    longdesc: "Path of the PEM CA certificate that signed the etcd servers' certificates. Needed \
        for https endpoints. While promoted, the guard reads etcd_cacert, etcd_cert and etcd_key \
        again every 5 s: new contents (a certificate renewed in place) that an etcd member \
        accepts are used for every connection from then on, without a demote; contents that \
        cannot be read, parsed or used are logged once and the ones in use kept. When the CA \
        itself is replaced, make etcd_cacert a bundle of the old and the new CA until every \
        member serves a certificate of the new one.",
    reloadable: true,
    ..BASE
};

pub const ETCD_CERT: Param = Param {
    name: "etcd_cert",
    shortdesc: "Client certificate for etcd (PEM)",
    longdesc: "Path of the PEM client certificate for etcd clusters that require client \
        certificates (--client-cert-auth). Needs etcd_key.",
    reloadable: true,
    ..BASE
};

pub const ETCD_KEY: Param = Param {
    name: "etcd_key",
    shortdesc: "Client key for etcd (PEM)",
    longdesc: "Path of the PEM private key of etcd_cert.",
    reloadable: true,
    ..BASE
};

pub const ETCD_USER: Param = Param {
    name: "etcd_user",
    shortdesc: "etcd user (etcd authentication)",
    longdesc: "The etcd user the guard authenticates as, for etcd clusters with authentication \
        enabled (etcdctl auth enable). Needs etcd_password_file. The user's role needs readwrite \
        on the key range {etcd_prefix}/ and nothing else (docs/etcd-auth.md).",
    reloadable: true,
    ..BASE
};

pub const ETCD_PASSWORD_FILE: Param = Param {
    name: "etcd_password_file",
    shortdesc: "File holding etcd_user's password",
    longdesc: "Path of a file (make it mode 0600, owned by root) whose first line is etcd_user's \
        password, exactly (`etcdctl user add --interactive=false` reads one word: set a password \
        with white space interactively). Read by each agent action, and by the guard whenever it \
        authenticates (a password changed in etcd and in the file is used from then on); never \
        passed on a command line or kept in the CIB.",
    reloadable: true,
    ..BASE
};

pub const LEASE_TTL: Param = Param {
    name: "lease_ttl",
    kind: Kind::Integer,
    // Follows the cluster when unset (lease::cluster::default_ttl).
    default: None,
    shortdesc: "Leader lease TTL (seconds)",
    longdesc: "Time to live of the etcd lease that holds the leader key, in seconds (at least 2, \
        etcd's minimum). The guard renews it every lease_ttl/3. A crashed holder's key expires \
        at most lease_ttl after its last renewal, so promote timeouts must exceed it. When not \
        set it follows the cluster: corosync's failure detection time (token timeout plus \
        consensus timeout, as corosync runs them) in whole seconds, within 6 to 10 — 8 with \
        RHEL's defaults on 3 nodes (token 3000), 6 on 2 nodes — so that a crashed holder's \
        lease is gone when Pacemaker can promote elsewhere; 10 where no corosync runs.",
    range: Some((2, 3600)),
    unit: Some(Unit::Seconds),
    ..BASE
};

pub const LEASE_MARGIN: Param = Param {
    name: "lease_margin",
    kind: Kind::Integer,
    // Derived from lease_ttl when unset (LeaseClock::derived_margin): a fixed default would
    // make lease_ttl=3 alone invalid.
    default: None,
    shortdesc: "Self-fencing margin (seconds)",
    longdesc: "The guard self-fences (removes the VIP, stops the service) lease_margin seconds \
        before the lease could expire at etcd: its deadline is the send time of the last \
        successful keepalive + lease_ttl - lease_margin. At least 1, and less than 2/3 of \
        lease_ttl. It must exceed the worst clock drift and the time fencing takes. When not \
        set: lease_ttl/5 rounded, but at least 2 and at least what the fastest clock slew \
        needs (0.155 × lease_ttl), always below 2/3 of lease_ttl (1 for lease_ttl 2 or 3, 2 from \
        4 to 12, 6 for 30). Set alone, with lease_ttl following the cluster, that lease_ttl is \
        raised where needed to keep lease_margin valid.",
    unit: Some(Unit::Seconds),
    ..BASE
};

pub const ETCD_MOVE_LEADER: Param = Param {
    name: "etcd_move_leader",
    kind: Kind::Boolean,
    default: Some("true"),
    shortdesc: "Keep etcd's raft leader off the master's node",
    longdesc: "While promoted, move etcd's leadership (MoveLeader) to a member on another node \
        whenever a member on this node leads: checked right after promote and every 5 s. If the \
        master's node crashed while hosting the etcd leader, etcd would first have to elect a \
        new leader, and the old lease would outlive the crash by that election: the failover \
        would take longer by both. A member is on this node when its name is the node's name \
        or one of its URLs is an address of this node. Never to a member named after a node that \
        leads another resource under the same etcd_prefix (two masters would pass the \
        leadership back and forth): where every other member hosts a master, it stays. With \
        etcd authentication, an etcd that refuses the move to etcd_user gets one warning and no \
        more tries.",
    ..BASE
};

pub const ETCD_OUTAGE: Param = Param {
    name: "etcd_outage",
    default: Some("auto"),
    shortdesc: "What an etcd outage does to the master: auto, hold or fence",
    longdesc: "What the master does when etcd stops answering (no quorum, no leader, time-outs, \
        refused) — never when etcd answers that the key is gone or another's, which fences at \
        once. 'hold': it keeps the VIP and the service past its lease's deadline only while its \
        own corosync proves, every 0.5 s, that the cluster is whole (quorate, and every node of \
        the nodelist in the membership) and its own Pacemaker shows this node online, and fences \
        within 3 s of the last such proof; it renews its lease, or takes the key back, when etcd \
        answers again. It leaves a failsafe record in etcd: another node of the same cluster \
        takes over from it only once it is proven not to hold — fenced by a power device, \
        demoted, or out of the membership for longer than a hold can outlive it, which adds \
        twice corosync's detection time plus about 5 s to a failover in a cluster without \
        fencing; a host outside the cluster only on the operator's word (docs/safety.md). \
        'auto' (the default): hold where the cluster has power fencing (fencing enabled, no \
        fabric device such as fence_scsi or one with provides=unfencing), read again at every \
        proof; fence where it has not. 'fence': fence at the lease's deadline, as before: an \
        etcd outage is then a master outage. Without corosync (hamaster takeover) the \
        master always fences.",
    ..BASE
};

pub const SERVICE: Param = Param {
    name: "service",
    shortdesc: "systemd unit of the master service",
    longdesc: "The master service as a systemd unit, started and stopped with systemctl. The \
        unit can read the fencing token from /run/hamaster/{resource}/service.env \
        (EnvironmentFile=). Exactly one of service and command must be set.",
    ..BASE
};

pub const COMMAND: Param = Param {
    name: "command",
    shortdesc: "Program of the master service",
    longdesc: "The master service as a program run and supervised by the guard (absolute path). \
        It gets HAMASTER_ROLE=promoted, HAMASTER_FENCING_TOKEN, HAMASTER_RESOURCE and \
        HAMASTER_NODE in its environment and dies with the guard (with standby=warm: \
        HAMASTER_ROLE=standby and no token, under the resident guard; promote_command hands \
        over the role and the token, demote_command takes the role back). Its output (stdout and stderr, line by line) goes to syslog under the \
        resource's name and its own pid, facility HA_LOGFACILITY (daemon when unset): \
        `journalctl -t RESOURCE` shows it, Pacemaker's log does not; where no syslog socket \
        answers, or HA_LOGFACILITY=none, it goes to the agent's log as `RESOURCE service: …`. \
        journald counts it against Pacemaker's rate limit (the guard's cgroup), so it has a \
        limit of its own, under a third of journald's default: at most 1000 lines per 10 s; \
        the lines beyond are dropped and counted, and the count is said in its stream (`hamaster \
        suppressed N lines…`) with the next window's first line. A service that must never \
        lose a line is better run as a unit (service=), with a journal and a rate limit of its \
        own. Exactly one of service and command must be set.",
    ..BASE
};

pub const ARGS: Param = Param {
    name: "args",
    shortdesc: "Arguments of command",
    longdesc: "Arguments of command, split the way a shell splits words (quotes honoured), but no \
        shell is run.",
    ..BASE
};

pub const WORKDIR: Param = Param {
    name: "workdir",
    shortdesc: "Working directory of command",
    longdesc: "Working directory of command (default /).",
    ..BASE
};

pub const USER: Param = Param {
    name: "user",
    shortdesc: "User to run command as",
    longdesc: "User name to run command as (its primary group and supplementary groups too). \
        Default: root.",
    ..BASE
};

pub const HEALTH_URL: Param = Param {
    name: "health_url",
    shortdesc: "Health URL of the master service",
    longdesc: "http:// or https:// URL that answers 2xx while the service is healthy, or \
        tcp://HOST:PORT, where a TCP connection that opens is a passed check (like keepalived's \
        TCP_CHECK). Promote waits for it; health_failures failed checks in a row make monitor \
        report a failed promoted instance. Without it (and without health_command), a running \
        process (or an active unit) counts as healthy.",
    reloadable: true,
    ..BASE
};

pub const HEALTH_COMMAND: Param = Param {
    name: "health_command",
    shortdesc: "Health check command of the master service",
    longdesc: "A command run by /bin/sh -c as the service's user, in its workdir, every \
        health_interval (like keepalived's track_script): exit status 0 is a passed check, any \
        other status a failed one, and a command still running after health_timeout is killed \
        with everything it started (its process group) and counts as failed. Its output is \
        discarded. Instead of health_url, not beside it.",
    reloadable: true,
    ..BASE
};

pub const HEALTH_CACERT: Param = Param {
    name: "health_cacert",
    shortdesc: "CA certificate for health_url (PEM)",
    longdesc: "PEM CA certificate that signed the service's certificate, for https health URLs. \
        Renewed in place (new contents at the same path), it is used from the next check on; a \
        file that holds no CA certificate is logged once and the CA in use kept.",
    reloadable: true,
    ..BASE
};

pub const HEALTH_TIMEOUT: Param = Param {
    name: "health_timeout",
    kind: Kind::Integer,
    default: Some("2000"),
    shortdesc: "Health check timeout (ms)",
    longdesc: "Timeout of one health check, in milliseconds.",
    reloadable: true,
    range: Some((1, 600_000)),
    unit: Some(Unit::Milliseconds),
    ..BASE
};

pub const HEALTH_INTERVAL: Param = Param {
    name: "health_interval",
    kind: Kind::Integer,
    default: Some("2"),
    shortdesc: "Health check interval (s)",
    longdesc: "Seconds between two health checks of the promoted service (like keepalived's \
        vrrp_script interval).",
    reloadable: true,
    range: Some((1, 3600)),
    unit: Some(Unit::Seconds),
    ..BASE
};

pub const HEALTH_FAILURES: Param = Param {
    name: "health_failures",
    kind: Kind::Integer,
    default: Some("3"),
    shortdesc: "Failed health checks before the service counts as unhealthy",
    longdesc: "How many health checks in a row must fail (error, timeout, or a status other \
        than 2xx) before the promoted monitor reports the service unhealthy (9) and Pacemaker \
        recovers it — like keepalived's vrrp_script fall or Kubernetes' failureThreshold. One \
        slow or failed check alone never fails over. A service process that has exited counts \
        at once, whatever this says.",
    reloadable: true,
    range: Some((1, 100)),
    ..BASE
};

pub const PUSH_FAILURES: Param = Param {
    name: "push_failures",
    kind: Kind::Boolean,
    default: Some("true"),
    shortdesc: "Tell Pacemaker at once when the service fails",
    longdesc: "When the promoted service exits, or turns unhealthy (after health_failures \
        failed checks), or its VIP is deleted or its link set down by someone else, the guard \
        runs `crm_resource --fail` for this resource on this node, so that Pacemaker starts \
        recovery at once instead of at the next monitor. false: Pacemaker finds out at the next \
        promoted monitor.",
    reloadable: true,
    ..BASE
};

pub const TICKLE: Param = Param {
    name: "tickle",
    kind: Kind::Boolean,
    default: Some("true"),
    shortdesc: "Reset the last master's client connections after a takeover",
    longdesc: "While promoted, the guard records the VIP's established TCP connections in etcd, \
        beside the leader key ({etcd_prefix}/{cluster_name}/{resource}/sessions, without a \
        lease, written only while the key is ours): a connection seen in two samples a second \
        apart, a write only when that set changed (at most one a second), at most 1024 \
        connections of 20 to 44 bytes each (IPv6: up to 96), the oldest kept. After a takeover the new master \
        sends each recorded client a 'tickle ACK' from the VIP, as Samba's CTDB does (three \
        rounds 0.6 s apart, each only to those that have not answered): the client answers, \
        this node has no such connection and resets it, and the client reconnects at once \
        instead of waiting for its own timeout (TCP keepalive: two hours). Connections this \
        node owns itself (a warm standby's service) are left alone. The clients' addresses \
        and ports are stored in etcd. false: no tickle is sent (the connections are still \
        recorded for repoint_neighbors); both false: nothing is recorded, and the record is \
        emptied. A cold standby's clients are told once its service has started.",
    reloadable: true,
    ..BASE
};

pub const REPOINT_NEIGHBORS: Param = Param {
    name: "repoint_neighbors",
    kind: Kind::Boolean,
    default: Some("true"),
    shortdesc: "Ask each client on the link and the gateway for its address after a takeover",
    longdesc: "Besides the gratuitous announcements (arp_count), the new master sends an ARP \
        request (IPv6: a Neighbor Solicitation) from the VIP for each client that tickle \
        recorded on the VIP's link, for the gateway through which the link reaches any other \
        recorded client, and for the link's default gateways. A host that ignores \
        gratuitous ARP (Linux's drop_gratuitous_arp, many firewalls and switches) still learns \
        the VIP's new MAC from a request for its own address, and its answer shows it did. \
        Three rounds 0.6 s apart, each only to those that have not answered. false: the \
        announcements alone.",
    reloadable: true,
    ..BASE
};

pub const WATCHDOG: Param = Param {
    name: "watchdog",
    default: Some("auto"),
    shortdesc: "Hardware watchdog while promoted: off, auto or required",
    longdesc:
        "While promoted the guard holds a watchdog device (like sbd and Patroni) and pings it \
        after each lease renewal: a guard that is frozen (SIGSTOP, a stuck kernel call, a paused \
        VM) stops pinging and the watchdog resets the node before the lease can end at etcd, so \
        its service cannot serve on. It is armed after the key is taken and before the VIP goes \
        up, and disarmed (magic close) once VIP and service are confirmed down. 'auto' uses a \
        device when one is free and runs without it otherwise (status and the log say why); \
        'required' refuses to promote without one; 'off' never opens one. Never the device sbd \
        uses (SBD_WATCHDOG_DEV in /etc/sysconfig/sbd or /etc/default/sbd, else /dev/watchdog, \
        while sbd is enabled or running).",
    ..BASE
};

pub const WATCHDOG_DEVICE: Param = Param {
    name: "watchdog_device",
    shortdesc: "Watchdog device",
    longdesc:
        "The watchdog device to use (/dev/watchdog1). Default: the first /dev/watchdogN that \
        opens and takes a timeout, of those that are not sbd's, not active and have nowayout off.",
    ..BASE
};

pub const METRICS_ADDRESS: Param = Param {
    name: "metrics_address",
    shortdesc: "Address for metrics and the leader endpoint (host:port)",
    longdesc:
        "While promoted the guard serves HTTP on this TCP address (0.0.0.0:9405, [::]:9405, \
        127.0.0.1:9405; the same value is used on every node, so a node's own address would \
        bind on that node only): GET /metrics in Prometheus' text format, GET /leader (200 only while \
        this guard holds the leader key with a live lease, the VIP up and the service healthy; \
        503 otherwise) for a load balancer's health check where no VIP can move, and GET \
        /health (200 while the guard runs and has not failed). Unset: no listener. An address \
        that cannot be bound ends the promote on this node (nothing is raised). While the \
        instance runs unpromoted, a small listener serves the same address in its place: \
        /metrics with what the last monitor found (hamaster_standby, hamaster_promotable, \
        hamaster_etcd_reachable, hamaster_last_failure_timestamp_seconds), /leader 503, \
        /health 200; so every node of the cluster answers one scrape configuration.",
    ..BASE
};

pub const CONFLICT_ACTION: Param = Param {
    name: "conflict_action",
    default: Some("report"),
    shortdesc: "What a VIP conflict does: report or push",
    longdesc: "While promoted the guard watches the VIP's interface for ARP (IPv4) or Neighbor \
        Advertisements (IPv6) that claim the VIP for another MAC address (RFC 5227): it logs the \
        MAC, shows it in status and metrics, and defends the address with one announcement at \
        most every 10 s. 'push' also reports the failure to Pacemaker at once (crm_resource \
        --fail), which recovers the resource. Frames of this node's own interfaces never count.",
    reloadable: true,
    ..BASE
};

pub const EXTRA_VIPS: Param = Param {
    name: "extra_vips",
    shortdesc: "Further VIPs under the same lease",
    longdesc: "More addresses the master owns besides ip, each with settings of its own: \
        entries separated by ';', each a list of the VIP's parameters as name=value separated \
        by white space, for example \"ip=198.51.100.10 cidr_netmask=24 nic=eth1; \
        ip=2001:db8:2::10 cidr_netmask=64 nic=eth2\". Every entry needs ip; what it leaves out \
        takes the parameter's default (not the value of the first VIP). Every address is \
        raised after the key, carries the kernel lifetime, is removed first by a fence and \
        confirmed absent before a release, and is watched for conflicts and loss; monitor, \
        status, metrics and /leader cover each. Needs ip; at most 8 entries, no address twice.",
    ..BASE
};

pub const STANDBY: Param = Param {
    name: "standby",
    default: Some("cold"),
    shortdesc: "How the unpromoted instances keep the service: cold or warm",
    longdesc: "'cold' (the default): the service runs on the promoted node only; promote \
        starts it after the key and the VIP. 'warm': every started (unpromoted) instance runs \
        the service already, under a resident guard (`hamaster guard --standby`) that start \
        spawns and the unpromoted monitor checks, so that promote only takes the key, raises \
        the VIP, writes the fencing token and hands the running service the role \
        (promote_command), however long the service takes to start. The role is taken back \
        before the key is released (demote, a fence, a failed hand-over): by demote_command \
        when it is set and confirms in time, the service then serving on as a standby; else \
        by stopping the service, as a cold master's is, which the resident then starts again \
        as a standby. A standby service that must not act as the master unasked learns the role \
        and the fencing token from promote_command. A service that exits on a standby fails the \
        instance (monitor), and Pacemaker recovers it.",
    ..BASE
};

pub const PROMOTE_COMMAND: Param = Param {
    name: "promote_command",
    shortdesc: "Command that hands a warm standby the role",
    longdesc: "With standby=warm: run by /bin/sh -c as the service's user, in its workdir, \
        once the key is held, the VIPs are up and the fencing token is written, with \
        HAMASTER_ROLE=promoted, HAMASTER_FENCING_TOKEN, HAMASTER_RESOURCE and HAMASTER_NODE in \
        its environment (like keepalived's notify_master; it may signal the service or POST \
        to it). Exit status 0 confirms the hand-over; any other status, or still running after \
        10 s (killed with its process group), fails the promote: the service is stopped before \
        the key is released. Its output is discarded. Unset: the VIPs alone hand over (for a \
        service that serves whoever reaches it, such as an API server behind the VIP).",
    ..BASE
};

/// How long promote_command may take (then it is killed and the hand-over fails).
pub const PROMOTE_COMMAND_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

pub const DEMOTE_COMMAND: Param = Param {
    name: "demote_command",
    shortdesc: "Command that takes the role back from a warm master's service",
    longdesc: "With standby=warm: run by /bin/sh -c as the service's user, in its workdir, \
        whenever the role is taken back (demote, a fence, a failed raise after the hand-over), \
        with HAMASTER_ROLE=standby, HAMASTER_RESOURCE and HAMASTER_NODE in its environment \
        (like keepalived's notify_backup). Exit status 0 confirms that the service gave the \
        role up: it serves on as a standby and the key is released. Any other status, or \
        still running when its budget ends (killed with its process group), and the service \
        is stopped as without it, before the key is released. Its budget: at most 10 s, \
        ending early enough to leave the service's stop its grace (10 s, or half the time \
        left) within demote's timeout — after a fence, within a fraction of lease_margin; \
        where less than 0.5 s would be left, or the service's own process has exited, the \
        service is stopped at once. Unset: the role is taken back by stopping the service.",
    ..BASE
};

/// The most demote_command may take (less when the stop's own budget is shorter).
pub const DEMOTE_COMMAND_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The most addresses extra_vips may name.
pub const EXTRA_VIPS_MAX: usize = 8;

/// The master's own parameters, without the VIP.
pub const OWN: [Param; 33] = [
    ETCD_ENDPOINTS,
    ETCD_PREFIX,
    CLUSTER_NAME,
    ETCD_CACERT,
    ETCD_CERT,
    ETCD_KEY,
    ETCD_USER,
    ETCD_PASSWORD_FILE,
    LEASE_TTL,
    LEASE_MARGIN,
    ETCD_MOVE_LEADER,
    ETCD_OUTAGE,
    SERVICE,
    COMMAND,
    ARGS,
    WORKDIR,
    USER,
    STANDBY,
    PROMOTE_COMMAND,
    DEMOTE_COMMAND,
    HEALTH_URL,
    HEALTH_COMMAND,
    HEALTH_CACERT,
    HEALTH_TIMEOUT,
    HEALTH_INTERVAL,
    HEALTH_FAILURES,
    PUSH_FAILURES,
    TICKLE,
    REPOINT_NEIGHBORS,
    WATCHDOG,
    WATCHDOG_DEVICE,
    METRICS_ADDRESS,
    CONFLICT_ACTION,
];

const N_VIP: usize = super::vip::ALL.len();

/// `ocf:hamaster:master`'s table: its own parameters, then the VIP's (all optional: without
/// `ip` no VIP is managed), then extra_vips.
pub static MASTER_AGENT: [Param; OWN.len() + N_VIP + 1] = {
    let mut table = [EXTRA_VIPS; OWN.len() + N_VIP + 1];
    let mut i = 0;
    while i < OWN.len() {
        table[i] = OWN[i];
        i += 1;
    }
    while i < OWN.len() + N_VIP {
        table[i] = super::vip::ALL[i - OWN.len()];
        i += 1;
    }
    table
};
