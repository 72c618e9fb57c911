#!/bin/sh
# Topology "master-warm-two-networks": the control plane's master as the design documents have
# it — one promotable ocf:hamaster:master that owns an internal and an external VIP under one
# lease (IPv4 on the internal network, IPv6 on the external one) and keeps a warm standby: the
# service runs on every node, and promote hands the running process the role with
# promote_command instead of starting it (docs/safety.md, "Warm standby"). Run on any cluster
# node. Variables: as cib/master-with-vip.sh (ETCD_ENDPOINTS, VIP on the internal network,
# SERVICE, SERVICE_ARGS, HEALTH_URL, ...), and:
#   EXTERNAL_VIP    the external address (default 2001:db8:2::10/64 on EXTERNAL_NIC)
#   EXTERNAL_NIC    the external network's interface (default eth1)
#   PROMOTE_COMMAND run by /bin/sh -c with HAMASTER_ROLE=promoted and HAMASTER_FENCING_TOKEN
#                   when the standby is handed the role, e.g. "kill -USR1 $(cat /run/api.pid)"
#   DEMOTE_COMMAND  (optional) run with HAMASTER_ROLE=standby when the role is taken back;
#                   unset: the service is stopped and started again as a standby
set -eu
[ -n "${PROMOTE_COMMAND:-}" ] || { echo "$0: set PROMOTE_COMMAND, what hands the running standby the role" >&2; exit 6; }
EXTERNAL_VIP="${EXTERNAL_VIP:-2001:db8:2::10}"
EXTERNAL_NIC="${EXTERNAL_NIC:-eth1}"
EXTRA_VIPS="ip=$EXTERNAL_VIP cidr_netmask=64 nic=$EXTERNAL_NIC" STANDBY=warm \
    PROMOTE_COMMAND="$PROMOTE_COMMAND" DEMOTE_COMMAND="${DEMOTE_COMMAND:-}" \
    exec sh "$(dirname "$0")/master-with-vip.sh"
