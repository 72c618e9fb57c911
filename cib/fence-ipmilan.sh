#!/bin/sh
# Fencing as RHEL clusters are fenced, before any hamaster topology: one fence_ipmilan device
# per node, through that node's BMC (IPMI over LAN with RMCP+), each kept off the node it
# fences, and stonith-enabled=true. hamaster's proof needs a fence that cuts the power
# (docs/safety.md, "What a fence must do"). Run on any cluster node. Variables:
#   NODES_BMCS     "NODE=BMC_ADDRESS ...", e.g. "n1=192.0.2.41 n2=192.0.2.42 n3=192.0.2.43"
#   BMC_USER, BMC_PASSWORD   an account with the administrator privilege on every BMC (the
#                  password is kept in the CIB, as fence_ipmilan's is in RHEL's examples;
#                  `password_script=` keeps it out)
#   BMC_CIPHER     RMCP+ cipher suite (default 3: HMAC-SHA1 with AES-128, which BMCs offer;
#                  17 on newer ones)
#   REBOOT_ACTION  unset: Pacemaker's reboot (off, then on: the node boots and rejoins as a
#                  standby); off: a fenced node stays down until someone powers it on
set -eu
for pair in $NODES_BMCS; do
    node=${pair%%=*}
    bmc=${pair#*=}
    pcs stonith create "ipmi-$node" fence_ipmilan ip="$bmc" ipport=623 \
        username="$BMC_USER" password="$BMC_PASSWORD" lanplus=1 cipher="${BMC_CIPHER:-3}" \
        privlvl=administrator pcmk_host_list="$node" \
        ${REBOOT_ACTION:+pcmk_reboot_action="$REBOOT_ACTION"} \
        op monitor interval=60s
    pcs constraint location "ipmi-$node" avoids "$node"
done
pcs property set stonith-enabled=true
