#!/usr/bin/env python3
"""leader_elector: the leader key of a Patroni cluster, kept the way Patroni keeps it in etcd
(Patroni's `etcd:` section, etcd's v2 API, which vip-manager 1.0 reads), for the peers'
comparison in `make bench-failover`. Not Patroni: its HA loop reduced to what decides who
holds the key.

Every LOOP_WAIT seconds (Patroni's loop_wait, default 10):
- the service (Patroni's postgres) is started when it does not run, on every node: replicas run
  it too, and a leader whose service died restarts it and keeps the key (Patroni restarts a
  crashed primary in place);
- the leader refreshes its key: written again with the same value and a fresh TTL, only if it
  still holds it (prevValue); when etcd has not answered for RETRY_TIMEOUT (default 10) it stops
  being leader (Patroni demotes itself);
- a node that is not leader takes the key when it is absent (prevExist=false), with TTL
  seconds (default 30).

Each etcd endpoint in turn; standard library only.

Usage: leader_elector.py NAME ENDPOINTS KEY TTL LOOP_WAIT RETRY_TIMEOUT -- SERVICE ARGS...
"""

import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


class Etcd:
    def __init__(self, endpoints, timeout):
        self.endpoints = endpoints.split(",")
        self.timeout = timeout

    def put(self, key, query, form):
        """The HTTP status of the first endpoint that answers, or None when none does."""
        for ep in self.endpoints:
            url = f"{ep}/v2/keys{key}?{urllib.parse.urlencode(query)}"
            req = urllib.request.Request(
                url, data=urllib.parse.urlencode(form).encode(), method="PUT"
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
            except Exception:
                continue
        return None


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    name, endpoints, key, ttl, loop_wait, retry_timeout = sys.argv[1:sep]
    service = sys.argv[sep + 1:]
    loop_wait, retry_timeout = float(loop_wait), float(retry_timeout)
    etcd = Etcd(endpoints, timeout=max(retry_timeout / 3, 1.0))
    leader = False
    last_ok = time.monotonic()
    child = None
    # Bounded: the lab stops it; a day at the most.
    until = time.monotonic() + 86400
    while time.monotonic() < until:
        if child is None or child.poll() is not None:
            child = subprocess.Popen(service)
        if leader:
            status = etcd.put(key, {"prevValue": name}, {"value": name, "ttl": ttl})
            if status == 200:
                last_ok = time.monotonic()
            elif status is not None or time.monotonic() - last_ok > retry_timeout:
                print(f"{name}: no longer leader ({status})", flush=True)
                leader = False
        if not leader:
            status = etcd.put(key, {"prevExist": "false"}, {"value": name, "ttl": ttl})
            if status == 201:
                leader = True
                last_ok = time.monotonic()
                print(f"{name}: leader", flush=True)
        time.sleep(loop_wait)


if __name__ == "__main__":
    main()
