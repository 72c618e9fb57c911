#!/bin/sh
# Topology "vip-plus-master": the VIP as its own ocf:hamaster:vip resource, colocated with
# the promoted instance of a promotable ocf:hamaster:master (without a built-in VIP) and
# started after it is promoted. Variables as in master-with-vip.sh.
set -eu
pcs resource create api ocf:hamaster:master \
    etcd_endpoints="$ETCD_ENDPOINTS" lease_ttl="${LEASE_TTL:-10}" lease_margin="${LEASE_MARGIN:-2}" \
    command="$SERVICE" args="$SERVICE_ARGS" health_url="$HEALTH_URL" \
    op monitor interval=2s role=Promoted timeout=10s \
    op monitor interval=3s role=Unpromoted timeout=10s \
    op promote timeout=30s op demote timeout=30s op stop timeout=40s \
    promotable promoted-max=1 promoted-node-max=1
pcs resource create api-vip ocf:hamaster:vip ip="$VIP" cidr_netmask=24 op monitor interval=2s
pcs constraint colocation add api-vip with Promoted api-clone INFINITY
pcs constraint order promote api-clone then start api-vip
