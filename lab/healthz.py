#!/usr/bin/env python3
"""A small master service for tests: serves GET /healthz over HTTPS (or HTTP) with its own
test certificate. 200 while STATE_DIR/unhealthy does not exist, 503 while it does; one slow
answer after STATE_DIR/slow-once appears; listens only after the seconds STATE_DIR/start-delay
names, where it exists. Records the
fencing token it was started with in STATE_DIR/token (one line per start), and each connection
it accepts in STATE_DIR/connections."""
import http.server
import os
import ssl
import sys
import time

port, state = int(sys.argv[1]), sys.argv[2]
cert = sys.argv[3] if len(sys.argv) > 3 else None
key = sys.argv[4] if len(sys.argv) > 4 else None

with open(os.path.join(state, "token"), "a") as f:
    f.write("%s %d\n" % (os.environ.get("HAMASTER_FENCING_TOKEN", "none"), os.getpid()))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        # One line per connection: tests check that the guard's probe keeps its connection.
        with open(os.path.join(state, "connections"), "a") as f:
            f.write("%s\n" % (self.client_address,))
        super().setup()

    def do_GET(self):
        # STATE_DIR/slow-once: the next answer comes late (after the guard's 2 s timeout), once.
        slow = os.path.join(state, "slow-once")
        if os.path.exists(slow):
            os.remove(slow)
            time.sleep(3)
        ok = self.path == "/healthz" and not os.path.exists(os.path.join(state, "unhealthy"))
        body = b"ok\n" if ok else b"unhealthy\n"
        self.send_response(200 if ok else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


# STATE_DIR/start-delay (seconds): a service that needs that long before it listens.
try:
    with open(os.path.join(state, "start-delay")) as f:
        time.sleep(float(f.read().strip() or 0))
except FileNotFoundError:
    pass

# One line on each stream: tests find them in the guard's log.
print("healthz: listening on port %d" % port, flush=True)
sys.stderr.write("healthz: token %s\n" % os.environ.get("HAMASTER_FENCING_TOKEN", "none"))
sys.stderr.flush()

server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
