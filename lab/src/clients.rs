//! The VIP's clients as users have them (issue 53): idle connections that nothing but the far
//! end can end — a pooled HTTP keep-alive connection waiting on a long poll (lab/healthz.py's
//! `GET /wait`), a plain TCP session with nothing in flight — in a namespace of their own on
//! the lab's switch that, like many hosts, switches and firewalls, ignores gratuitous ARP and
//! unsolicited Neighbor Advertisements (`drop_gratuitous_arp`, `drop_unsolicited_na`) but
//! answers requests for its own address. Each client records when each of its connections
//! ended and how, and connects again at once.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::etcd::NET;
use crate::netns::{enter_netns, Netns, Switch};

/// The clients' host on the switch: NET.250.
pub const CLIENT_IP: &str = "198.51.100.250";

/// A host on `switch` (port `pc`) that drops gratuitous ARP and unsolicited NA.
pub fn stubborn_host(switch: &Switch, tag: &str) -> Netns {
    debug_assert!(CLIENT_IP.starts_with(NET));
    let ns = switch.attach(&format!("{tag}cl"), "pc", &format!("{CLIENT_IP}/24"));
    for s in [
        "net.ipv4.conf.all.drop_gratuitous_arp=1",
        "net.ipv4.conf.lan0.drop_gratuitous_arp=1",
        "net.ipv6.conf.all.drop_unsolicited_na=1",
        "net.ipv6.conf.lan0.drop_unsolicited_na=1",
    ] {
        ns.sysctl(s);
    }
    ns
}

/// The MAC `ns` sends to for `ip` now (its neighbour entry), if it has one.
pub fn neighbour_mac(ns: &Netns, ip: &str) -> Option<String> {
    let out = ns.ip(&["neigh", "show", ip]);
    let mut words = out.split_whitespace();
    words.find(|w| *w == "lladdr")?;
    words.next().map(String::from)
}

/// The two kinds of idle client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `GET /wait` on a keep-alive connection: the server answers only after an hour.
    LongPoll,
    /// Connected, nothing sent, nothing in flight.
    Silent,
}

/// One connection's end, as the client saw it.
#[derive(Debug, Clone)]
pub struct Ended {
    pub kind: Kind,
    pub connected: Instant,
    pub at: Instant,
    /// "reset", "closed" (a FIN), "left" (`IdleClients::reconnect`), or the error.
    pub how: String,
}

/// The idle clients, connected to VIP:port again each time a connection ends.
pub struct IdleClients {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
    ended: Arc<Mutex<Vec<Ended>>>,
    /// When each client's current connection was made (None: not connected).
    connected: Vec<Arc<Mutex<Option<Instant>>>>,
    /// Raised by `reconnect`: each client leaves its connection and makes a new one.
    generation: Arc<AtomicU64>,
}

impl IdleClients {
    pub fn start(ns: &str, vip: &str, port: u16) -> IdleClients {
        let addr: SocketAddr = format!("{vip}:{port}").parse().expect("VIP:port");
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(Vec::new()));
        let generation = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        let mut connected = Vec::new();
        for kind in [Kind::LongPoll, Kind::Silent] {
            let (stop, ended, ns) = (stop.clone(), ended.clone(), ns.to_string());
            let generation = generation.clone();
            let now = Arc::new(Mutex::new(None));
            connected.push(now.clone());
            handles.push(std::thread::spawn(move || {
                enter_netns(&ns);
                client(kind, addr, &stop, &generation, &ended, &now);
            }));
        }
        IdleClients {
            stop,
            handles,
            ended,
            connected,
            generation,
        }
    }

    /// Every client leaves the connection it waits on (recorded as "left") and connects
    /// again: what a benchmark does to the clients a tool left hanging, before its next trial.
    pub fn reconnect(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits (bounded) until every client holds a connection made after `since`.
    pub fn wait_connected_since(&self, since: Instant, limit: Duration) -> bool {
        crate::wait_for(limit, || {
            self.connected
                .iter()
                .all(|c| c.lock().unwrap().is_some_and(|t| t >= since))
        })
    }

    /// The connections that ended after `since`, in order.
    pub fn ended_since(&self, since: Instant) -> Vec<Ended> {
        let all = self.ended.lock().unwrap();
        all.iter().filter(|e| e.at >= since).cloned().collect()
    }

    /// Waits (bounded) until every client's connection made before `since` has ended after it.
    pub fn wait_ended_since(&self, since: Instant, limit: Duration) -> Vec<Ended> {
        let _ = crate::wait_for(limit, || {
            self.ended_since(since).len() >= self.handles.len()
        });
        self.ended_since(since)
    }

    pub fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for IdleClients {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One client: connect (again every 50 ms until it can), wait on the connection until it ends,
/// record how, again; bounded by `stop` and half an hour.
fn client(
    kind: Kind,
    addr: SocketAddr,
    stop: &AtomicBool,
    generation: &AtomicU64,
    ended: &Mutex<Vec<Ended>>,
    now: &Mutex<Option<Instant>>,
) {
    let limit = Instant::now() + Duration::from_secs(1800);
    while !stop.load(Ordering::SeqCst) && Instant::now() < limit {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(150)) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let connected = Instant::now();
        let made_in = generation.load(Ordering::SeqCst);
        if kind == Kind::LongPoll
            && s.write_all(b"GET /wait HTTP/1.1\r\nHost: vip\r\n\r\n")
                .is_err()
        {
            continue;
        }
        *now.lock().unwrap() = Some(connected);
        // Short read timeouts only to look at `stop`: the connection itself waits forever.
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 512];
        let how = loop {
            if stop.load(Ordering::SeqCst) || Instant::now() >= limit {
                return;
            }
            if generation.load(Ordering::SeqCst) != made_in {
                break "left".to_string();
            }
            match s.read(&mut buf) {
                Ok(0) => break "closed".to_string(),
                Ok(_) => break "answered".to_string(),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break "reset".to_string(),
                Err(e) => break e.to_string(),
            }
        };
        *now.lock().unwrap() = None;
        ended.lock().unwrap().push(Ended {
            kind,
            connected,
            at: Instant::now(),
            how,
        });
    }
}
