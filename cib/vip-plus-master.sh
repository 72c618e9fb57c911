#!/bin/sh
# Topology "vip-plus-master": the VIP as its own ocf:hamaster:vip resource, colocated with
# the promoted instance of a promotable ocf:hamaster:master (without a built-in VIP) and
# started after it is promoted. Variables as in master-with-vip.sh.
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
    op monitor interval=2s role="$PROMOTED" \
    op monitor interval=3s role="$UNPROMOTED" \
    promotable promoted-max=1 promoted-node-max=1 ${DISABLED:+--disabled}
pcs resource create api-vip ocf:hamaster:vip ip="$VIP" cidr_netmask=24 op monitor interval=2s ${DISABLED:+--disabled}
pcs constraint colocation add api-vip with "$PROMOTED" api-clone INFINITY
pcs constraint order promote api-clone then start api-vip
