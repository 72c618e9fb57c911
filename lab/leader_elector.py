#!/usr/bin/env python3
"""leader_elector: the leader key of a Patroni cluster, kept the way Patroni keeps it, for the
peers' comparison in `make bench-failover` (vip-manager follows this key as it follows
Patroni's). Not Patroni: its HA loop reduced to what decides who holds the key.

Every LOOP_WAIT seconds (Patroni's loop_wait, default 10):
- the service (Patroni's postgres) is started when it does not run, on every node: replicas run
  it too, and a leader whose service died restarts it and keeps the key (Patroni restarts a
  crashed primary in place);
- the leader refreshes its lease (keep-alive); when etcd has not answered for RETRY_TIMEOUT
  (default 10) it stops being leader (Patroni demotes itself);
- a node that is not leader takes the key when it is absent: a transaction that creates it
  only if it does not exist, under a fresh lease of TTL seconds (default 30).

etcd's v3 JSON gateway over HTTP, each endpoint in turn; standard library only.

Usage: leader_elector.py NAME ENDPOINTS KEY TTL LOOP_WAIT RETRY_TIMEOUT -- SERVICE ARGS...
"""

import base64
import json
import subprocess
import sys
import time
import urllib.request


def b64(text):
    return base64.b64encode(text.encode()).decode()


class Etcd:
    def __init__(self, endpoints, timeout):
        self.endpoints = endpoints.split(",")
        self.timeout = timeout

    def call(self, path, body):
        """The first endpoint's answer (JSON), or None when none answers in time."""
        for ep in self.endpoints:
            req = urllib.request.Request(
                ep + path,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return json.load(r)
            except Exception:
                continue
        return None


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    name, endpoints, key, ttl, loop_wait, retry_timeout = sys.argv[1:sep]
    service = sys.argv[sep + 1:]
    ttl, loop_wait, retry_timeout = int(ttl), float(loop_wait), float(retry_timeout)
    etcd = Etcd(endpoints, timeout=max(retry_timeout / 3, 1.0))
    lease = None
    last_ok = time.monotonic()
    child = None
    # Bounded: the lab stops it; a day at the most.
    until = time.monotonic() + 86400
    while time.monotonic() < until:
        if child is None or child.poll() is not None:
            child = subprocess.Popen(service)
        if lease is not None:
            answer = etcd.call("/v3/lease/keepalive", {"ID": lease})
            alive = answer is not None and int(answer.get("result", {}).get("TTL", 0)) > 0
            if alive:
                last_ok = time.monotonic()
            elif answer is not None or time.monotonic() - last_ok > retry_timeout:
                print(f"{name}: no longer leader", flush=True)
                lease = None
        if lease is None:
            grant = etcd.call("/v3/lease/grant", {"TTL": ttl})
            if grant is not None and "ID" in grant:
                txn = etcd.call("/v3/kv/txn", {
                    "compare": [{"key": b64(key), "target": "CREATE", "create_revision": "0"}],
                    "success": [{"request_put": {
                        "key": b64(key), "value": b64(name), "lease": grant["ID"]}}],
                })
                if txn is not None and txn.get("succeeded"):
                    lease = grant["ID"]
                    last_ok = time.monotonic()
                    print(f"{name}: leader", flush=True)
                else:
                    etcd.call("/v3/lease/revoke", {"ID": grant["ID"]})
        time.sleep(loop_wait)


if __name__ == "__main__":
    main()
