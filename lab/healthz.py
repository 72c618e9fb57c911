#!/usr/bin/env python3
"""A small master service for tests: serves GET /healthz over HTTPS (or HTTP) with its own
test certificate. 200 while STATE_DIR/unhealthy does not exist, 503 while it does; one slow
answer after STATE_DIR/slow-once appears; GET /wait answers nothing for an hour (a long poll); listens only after the seconds STATE_DIR/start-delay
names, where it exists. Records the
fencing token it was started with in STATE_DIR/token (one line per start), and each connection
it accepts in STATE_DIR/connections.

Its role, for a warm standby (standby=warm): it starts with HAMASTER_ROLE (promoted when
unset) and HAMASTER_FENCING_TOKEN, and takes a new role from POST /role ("promoted TOKEN" or
"standby"), which `healthz.py --tell PORT` posts from a hook's environment (promote_command,
demote_command). Each role it takes is appended to STATE_DIR/../roles ("NODE ROLE TOKEN"),
shared by the nodes of one test, in the order the services took them. POST /write is a
client's write: refused (503) unless promoted, then stored in STATE_DIR/../storage, which
keeps the highest token it saw and refuses (409) a write stamped with a lower one, as storage
that checks fencing tokens does."""
import fcntl
import http.server
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

if sys.argv[1] in ("--tell", "--write"):
    # --tell (a hook): tell the service on this node the role in this environment, and wait
    # for its answer (the service has taken the role when this exits 0). --write (a client):
    # one write, its status and answer printed.
    tell = sys.argv[1] == "--tell"
    role = os.environ.get("HAMASTER_ROLE", "standby")
    body = role + " " + os.environ.get("HAMASTER_FENCING_TOKEN", "") if tell else ""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    url = "https://127.0.0.1:%s/%s" % (sys.argv[2], "role" if tell else "write")
    req = urllib.request.Request(url, data=body.encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    print(status, text.strip())
    sys.exit(0 if status == 200 or not tell else 1)

port, state = int(sys.argv[1]), sys.argv[2]
cert = sys.argv[3] if len(sys.argv) > 3 else None
key = sys.argv[4] if len(sys.argv) > 4 else None

with open(os.path.join(state, "token"), "a") as f:
    f.write("%s %d\n" % (os.environ.get("HAMASTER_FENCING_TOKEN", "none"), os.getpid()))

shared = os.path.dirname(os.path.abspath(state))
node = os.environ.get("HAMASTER_NODE", "?")
me = {
    "role": os.environ.get("HAMASTER_ROLE", "promoted"),
    "token": int(os.environ.get("HAMASTER_FENCING_TOKEN", "0") or 0),
}


def locked(name, change):
    """Reads, changes and writes one shared file under an exclusive lock: change(text) returns
    (new text or None to keep it, result)."""
    path = os.path.join(shared, name)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        new, result = change(f.read())
        if new is not None:
            f.seek(0)
            f.truncate()
            f.write(new)
            f.flush()
        return result


def take_role(role, token):
    me["role"], me["token"] = role, token
    locked("roles", lambda text: (text + "%s %s %d\n" % (node, role, token), None))


def store(token):
    """The storage's check: a write stamped with a lower token than it has seen is refused."""

    def change(text):
        seen = json.loads(text) if text else {"highest": 0, "writes": []}
        if token < seen["highest"]:
            return None, "refused: token %d is lower than %d" % (token, seen["highest"])
        seen["highest"] = token
        seen["writes"].append([node, token])
        return json.dumps(seen), None

    return locked("storage", change)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        # One line per connection: tests check that the guard's probe keeps its connection.
        with open(os.path.join(state, "connections"), "a") as f:
            f.write("%s\n" % (self.client_address,))
        super().setup()

    def do_GET(self):
        # GET /wait: a long poll that nothing answers within the hour (an idle client's
        # connection, issue 53).
        if self.path == "/wait":
            time.sleep(3600)
            return
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

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        words = self.rfile.read(length).decode().split()
        token = words[1] if len(words) > 1 and words[0] == "promoted" else "0"
        if self.path == "/role" and words and words[0] in ("promoted", "standby") and token.isdigit():
            token = int(token)
            take_role(words[0], token)
            code, body = 200, "role %s\n" % words[0]
        elif self.path == "/write" and me["role"] != "promoted":
            code, body = 503, "not the master\n"
        elif self.path == "/write":
            refused = store(me["token"])
            code, body = (409, refused + "\n") if refused else (200, "stored\n")
        else:
            code, body = 400, "?\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

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
