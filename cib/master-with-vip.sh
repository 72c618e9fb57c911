#!/bin/sh
# Topology "master-with-vip" (recommended): one promotable ocf:hamaster:master that owns its
# VIP. Run on any cluster node. Variables:
#   ETCD_ENDPOINTS  http://192.0.2.21:2379,http://192.0.2.22:2379,http://192.0.2.23:2379
#   VIP             the floating address, e.g. 192.0.2.10
#   SERVICE         absolute path of the master service's program
#   SERVICE_ARGS    its arguments (shell-style words)
#   HEALTH_URL      e.g. http://127.0.0.1:8443/healthz
#   LEASE_TTL, LEASE_MARGIN (seconds; unset: the agent's defaults)
#   MONITOR_INTERVAL, UNPROMOTED_INTERVAL (default 2s and 3s), PUSH_FAILURES (default true)
#   ETCD_MOVE_LEADER (default true), ETCD_OUTAGE (auto, hold or fence; unset: the agent's default)
#   METRICS_ADDRESS (unset: none), e.g. 0.0.0.0:9405 for /metrics and /leader (docs/metrics.md)
#   EXTRA_VIPS      (unset: none) more addresses under the same lease, e.g. on the external
#                   network: "ip=2001:db8:2::10 cidr_netmask=64 nic=eth1" (';' between several)
#   STANDBY         cold (unset: the agent's default) or warm: every started instance runs the
#                   service, promote hands it the role (PROMOTE_COMMAND, run by /bin/sh -c),
#                   demote takes it back (DEMOTE_COMMAND; unset: by stopping the service)
#   DISABLED        set (to anything): the resource is created stopped; `pcs resource enable
#                   api-clone` starts it (docs/migrating-from-ipaddr2.md)
# Operation timeouts are the agent's meta-data's, which pcs copies: start 20 s, promote 60 s,
# demote 40 s, stop 40 s, monitor 20 s (Pacemaker's default).
set -eu
# The role names this pcs takes: Master/Slave up to pcs 0.10.9 (RHEL 8.0-8.4), Promoted and
# Unpromoted from 0.10.10 on (RHEL 8.5+, 9, 10). RHEL 7's pcs 0.9 (no "promotable") is untested.
case "$(pcs --version)" in
0.9.*) echo "pcs $(pcs --version) (RHEL 7) is not supported by this script; see README.md" >&2; exit 1 ;;
0.10.[0-9] | 0.10.[0-9][!0-9]*) PROMOTED=Master UNPROMOTED=Slave ;;
*) PROMOTED=Promoted UNPROMOTED=Unpromoted ;;
esac
pcs resource create api ocf:hamaster:master \
    etcd_endpoints="$ETCD_ENDPOINTS" ${LEASE_TTL:+lease_ttl="$LEASE_TTL"} ${LEASE_MARGIN:+lease_margin="$LEASE_MARGIN"} \
    command="$SERVICE" args="$SERVICE_ARGS" health_url="$HEALTH_URL" \
    push_failures="${PUSH_FAILURES:-true}" etcd_move_leader="${ETCD_MOVE_LEADER:-true}" \
    ${ETCD_OUTAGE:+etcd_outage="$ETCD_OUTAGE"} \
    ${METRICS_ADDRESS:+metrics_address="$METRICS_ADDRESS"} \
    ${EXTRA_VIPS:+extra_vips="$EXTRA_VIPS"} \
    ${STANDBY:+standby="$STANDBY"} ${PROMOTE_COMMAND:+promote_command="$PROMOTE_COMMAND"} \
    ${DEMOTE_COMMAND:+demote_command="$DEMOTE_COMMAND"} \
    ip="$VIP" cidr_netmask=24 \
    op monitor interval="${MONITOR_INTERVAL:-2s}" role="$PROMOTED" \
    op monitor interval="${UNPROMOTED_INTERVAL:-3s}" role="$UNPROMOTED" \
    promotable promoted-max=1 promoted-node-max=1 ${DISABLED:+--disabled}
