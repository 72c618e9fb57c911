#!/bin/sh
# Topology "vip-plus-master": the VIP as its own ocf:hamaster:vip resource (RESOURCE-vip),
# colocated with the promoted instance of a promotable ocf:hamaster:master (without a built-in
# VIP, created by master-with-vip.sh) and started after it is promoted. Variables as in
# master-with-vip.sh (VIP, CIDR_NETMASK and NIC go to the VIP's resource); both resources are
# created stopped unless ENABLE=yes: `pcs resource enable RESOURCE-clone RESOURCE-vip`.
set -eu
[ -n "${VIP:-}" ] || { echo "$0: set VIP, the floating address, e.g. 192.0.2.10" >&2; exit 6; }
WITHOUT_VIP=yes sh "$(dirname "$0")/master-with-vip.sh"
RESOURCE="${RESOURCE:-api}"
case "$(pcs --version)" in
0.10.[0-9] | 0.10.[0-9][!0-9]*) PROMOTED=Master ;;
*) PROMOTED=Promoted ;;
esac
# Created stopped in any case, and enabled (ENABLE=yes) only once its constraints are there:
# in between, Pacemaker could start it anywhere.
pcs resource create "$RESOURCE-vip" ocf:hamaster:vip ip="$VIP" cidr_netmask="${CIDR_NETMASK:-24}" \
    ${NIC:+nic="$NIC"} op monitor interval="${VIP_MONITOR_INTERVAL:-10s}" --disabled
pcs constraint colocation add "$RESOURCE-vip" with "$PROMOTED" "$RESOURCE-clone" INFINITY
pcs constraint order promote "$RESOURCE-clone" then start "$RESOURCE-vip"
if [ "${ENABLE:-}" = yes ]; then
    pcs resource enable "$RESOURCE-vip"
fi
