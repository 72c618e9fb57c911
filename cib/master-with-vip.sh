#!/bin/sh
# Topology "master-with-vip" (recommended): one promotable ocf:hamaster:master that owns its
# VIP. Run on any cluster node, as it is: every value is a variable. The resource is created
# STOPPED unless ENABLE=yes: check it (`pcs resource config RESOURCE`), then
# `pcs resource enable RESOURCE-clone`.
# Required:
#   ETCD_ENDPOINTS  e.g. https://192.0.2.21:2379,https://192.0.2.22:2379,https://192.0.2.23:2379
#   VIP             the floating address, e.g. 192.0.2.10
#   and the service, one of:
#   SERVICE_UNIT    a systemd unit the agent starts and stops (service=), e.g. api-server.service
#   SERVICE         absolute path of a program the agent supervises itself (command=), with
#   SERVICE_ARGS    its arguments (shell-style words; may be empty)
# Optional (unset: the agent's own default, which `pcs resource describe ocf:hamaster:master`
# shows):
#   RESOURCE        the resource's id (default api; the clone is RESOURCE-clone)
#   CIDR_NETMASK    the VIP's prefix length (default 24)
#   NIC             the VIP's interface (unset: the interface whose route covers the VIP)
#   ETCD_CACERT, ETCD_CERT, ETCD_KEY   etcd over TLS: the CA, the client's certificate and key
#   ETCD_USER, ETCD_PASSWORD_FILE      etcd's authentication (docs/etcd-auth.md)
#   HEALTH_URL      e.g. https://127.0.0.1:8443/healthz, or tcp://127.0.0.1:8443
#   LEASE_TTL, LEASE_MARGIN (seconds)
#   MONITOR_INTERVAL, UNPROMOTED_INTERVAL (default 10s and 11s, as README.md's), PUSH_FAILURES
#   (default true: a dead or unhealthy service is reported at once, not at the next monitor)
#   ETCD_MOVE_LEADER (default true), ETCD_OUTAGE (auto, hold or fence)
#   METRICS_ADDRESS e.g. 0.0.0.0:9405 for /metrics and /leader (docs/metrics.md)
#   EXTRA_VIPS      more addresses under the same lease, e.g. on the external network:
#                   "ip=2001:db8:2::10 cidr_netmask=64 nic=eth1" (';' between several)
#   STANDBY         cold or warm: every started instance runs the service, promote hands it
#                   the role (PROMOTE_COMMAND, run by /bin/sh -c), demote takes it back
#                   (DEMOTE_COMMAND; unset: by stopping the service)
#   ENABLE          yes: created started at once (only where nothing else holds the VIP or
#                   runs the service: docs/migrating-from-ipaddr2.md)
# Operation timeouts are the agent's meta-data's, which pcs copies: start 20 s, promote 60 s,
# demote 40 s, stop 40 s, monitor 20 s (Pacemaker's default).
set -eu
need() { echo "$0: $1" >&2; exit 6; }
[ -n "${ETCD_ENDPOINTS:-}" ] || need "set ETCD_ENDPOINTS, e.g. https://192.0.2.21:2379,https://192.0.2.22:2379"
[ -n "${VIP:-}" ] || [ "${WITHOUT_VIP:-}" = yes ] || need "set VIP, the floating address, e.g. 192.0.2.10"
if [ -n "${SERVICE_UNIT:-}" ] && [ -n "${SERVICE:-}" ]; then
    need "set SERVICE_UNIT (a systemd unit) or SERVICE (a program), not both"
fi
[ -n "${SERVICE_UNIT:-}" ] || [ -n "${SERVICE:-}" ] || need "set SERVICE_UNIT (a systemd unit) or SERVICE (a program's absolute path)"
case "${ENABLE:-}" in "" | yes) ;; *) need "ENABLE is yes or unset, not '$ENABLE'" ;; esac
RESOURCE="${RESOURCE:-api}"
DISABLED=--disabled
[ "${ENABLE:-}" != yes ] || DISABLED=
# The role names this pcs takes: Master/Slave up to pcs 0.10.9 (RHEL 8.0-8.4), Promoted and
# Unpromoted from 0.10.10 on (RHEL 8.5+, 9, 10). RHEL 7's pcs 0.9 (no "promotable") is untested.
case "$(pcs --version)" in
0.9.*) echo "pcs $(pcs --version) (RHEL 7) is not supported by this script; see README.md" >&2; exit 1 ;;
0.10.[0-9] | 0.10.[0-9][!0-9]*) PROMOTED=Master UNPROMOTED=Slave ;;
*) PROMOTED=Promoted UNPROMOTED=Unpromoted ;;
esac
if [ "${WITHOUT_VIP:-}" = yes ]; then
    # vip-plus-master.sh: the VIP is a resource of its own.
    set --
else
    set -- ip="$VIP" cidr_netmask="${CIDR_NETMASK:-24}" ${NIC:+nic="$NIC"}
fi
if [ -n "${SERVICE_UNIT:-}" ]; then
    set -- "$@" service="$SERVICE_UNIT"
else
    set -- "$@" command="$SERVICE" args="${SERVICE_ARGS:-}"
fi
pcs resource create "$RESOURCE" ocf:hamaster:master \
    etcd_endpoints="$ETCD_ENDPOINTS" \
    ${ETCD_CACERT:+etcd_cacert="$ETCD_CACERT"} ${ETCD_CERT:+etcd_cert="$ETCD_CERT"} \
    ${ETCD_KEY:+etcd_key="$ETCD_KEY"} \
    ${ETCD_USER:+etcd_user="$ETCD_USER"} ${ETCD_PASSWORD_FILE:+etcd_password_file="$ETCD_PASSWORD_FILE"} \
    ${LEASE_TTL:+lease_ttl="$LEASE_TTL"} ${LEASE_MARGIN:+lease_margin="$LEASE_MARGIN"} \
    ${HEALTH_URL:+health_url="$HEALTH_URL"} \
    push_failures="${PUSH_FAILURES:-true}" etcd_move_leader="${ETCD_MOVE_LEADER:-true}" \
    ${ETCD_OUTAGE:+etcd_outage="$ETCD_OUTAGE"} \
    ${METRICS_ADDRESS:+metrics_address="$METRICS_ADDRESS"} \
    ${EXTRA_VIPS:+extra_vips="$EXTRA_VIPS"} \
    ${STANDBY:+standby="$STANDBY"} ${PROMOTE_COMMAND:+promote_command="$PROMOTE_COMMAND"} \
    ${DEMOTE_COMMAND:+demote_command="$DEMOTE_COMMAND"} \
    "$@" \
    op monitor interval="${MONITOR_INTERVAL:-10s}" role="$PROMOTED" \
    op monitor interval="${UNPROMOTED_INTERVAL:-11s}" role="$UNPROMOTED" \
    promotable promoted-max=1 promoted-node-max=1 $DISABLED
