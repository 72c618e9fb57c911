#!/bin/sh
# Topology "ipaddr2-group-baseline": IPaddr2 and a plain service in one group, the way
# OpenShift 3.x configured its HA master. For side-by-side comparison only: nothing stops both
# sides of a split cluster from raising the VIP. Variables as in master-with-vip.sh, plus
#   NIC             the VIP's interface
set -eu
pcs resource create base-vip ocf:heartbeat:IPaddr2 ip="$VIP" cidr_netmask=24 nic="$NIC" \
    op monitor interval="${MONITOR_INTERVAL:-2s}" --group base
pcs resource create base-svc ocf:heartbeat:anything binfile="$SERVICE" cmdline_options="$SERVICE_ARGS" \
    op monitor interval="${MONITOR_INTERVAL:-2s}" --group base
