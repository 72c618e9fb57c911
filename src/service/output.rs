//! The supervised command's output: every line it writes to stdout or stderr goes to syslog
//! under the resource's name as its identifier and the service's pid (`journalctl -t api`),
//! as a systemd unit's output goes to the journal under its own name — not into Pacemaker's
//! log. Where no syslog answers (or HA_LOGFACILITY is `none`) the lines go to the guard's log
//! instead, tagged `{resource} service:`. Nothing is kept in /run. Each stream is read by a
//! thread of its own, so a chatty service or a slow log sink never stalls the guard's other
//! work.
//!
//! The lines have a rate limit of their own (`BURST` per `WINDOW`, both streams together):
//! journald counts what the guard sends against the cgroup the guard runs in, Pacemaker's
//! (`pacemaker.service`, RateLimitBurst 10000 per 30 s by default), so a service that writes
//! without limit would otherwise silence Pacemaker's own messages. Lines beyond it are dropped
//! and counted, and the count is said in the service's stream once the next window begins (or
//! the stream ends), as journald says what it suppressed. A service that must never lose a
//! line runs as a systemd unit (service=), whose journal and rate limit are its own.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longer lines are cut into pieces of this size, each a message of its own.
const MAX_LINE: usize = 8 * 1024;

/// The most lines of a service's output sent in one `WINDOW`: 3000 per 30 s at most, under a
/// third of journald's default burst for the cgroup the guard shares with Pacemaker.
pub const BURST: u32 = 1000;
pub const WINDOW: Duration = Duration::from_secs(10);

/// The rate limit of one service's output (both its streams).
#[derive(Debug)]
pub struct Limiter {
    burst: u32,
    window: Duration,
    start: Option<Instant>,
    sent: u32,
    dropped: u64,
}

/// What becomes of one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Sent; `suppressed` lines were dropped in the windows before it (to be said first).
    Send {
        suppressed: u64,
    },
    Drop,
}

impl Limiter {
    pub fn new(burst: u32, window: Duration) -> Limiter {
        Limiter {
            burst,
            window,
            start: None,
            sent: 0,
            dropped: 0,
        }
    }

    /// The verdict on a line that arrives at `now`.
    pub fn admit(&mut self, now: Instant) -> Verdict {
        let fresh = self
            .start
            .is_none_or(|s| now.saturating_duration_since(s) >= self.window);
        if fresh {
            self.start = Some(now);
            self.sent = 0;
        }
        if self.sent < self.burst {
            self.sent += 1;
            Verdict::Send {
                suppressed: std::mem::take(&mut self.dropped),
            }
        } else {
            self.dropped += 1;
            Verdict::Drop
        }
    }

    /// The lines dropped and not said yet (at the end of a stream).
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

/// One service's output limiter, shared by its streams.
pub fn limiter() -> Arc<Mutex<Limiter>> {
    Arc::new(Mutex::new(Limiter::new(BURST, WINDOW)))
}

/// What is said in the service's stream for lines dropped by the rate limit.
fn suppressed_note(n: u64) -> String {
    format!(
        "hamaster suppressed {n} lines of this service's output (more than {BURST} in {} s: \
         Pacemaker's log shares the journal's rate limit with it)",
        WINDOW.as_secs()
    )
}

/// Forwards `source` line by line until it closes (the service exited), within `limit`.
pub fn forward(
    source: impl Read + Send + 'static,
    resource: String,
    pid: u32,
    limit: Arc<Mutex<Limiter>>,
) {
    let name = format!("{resource} output");
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let tag = format!("{resource} service");
        let mut syslog = crate::logging::service_syslog(&resource, pid);
        let mut emit = |line: &str| {
            if let Some(logger) = syslog.as_mut() {
                if logger.info(line).is_ok() {
                    return;
                }
                log::warn!("{tag}: syslog stopped taking its output: in this log from now on");
                syslog = None;
            }
            log::info!("{tag}: {line}");
        };
        let verdict = |l: &Arc<Mutex<Limiter>>| {
            l.lock().map_or(Verdict::Send { suppressed: 0 }, |mut l| {
                l.admit(Instant::now())
            })
        };
        pump(source, |line| match verdict(&limit) {
            Verdict::Drop => {}
            Verdict::Send { suppressed } => {
                if suppressed > 0 {
                    emit(&suppressed_note(suppressed));
                }
                emit(line);
            }
        });
        let left = limit.lock().map_or(0, |mut l| l.take_dropped());
        if left > 0 {
            emit(&suppressed_note(left));
        }
    });
    if let Err(e) = spawned {
        log::warn!("cannot forward the service's output: {e}");
    }
}

/// Splits `source` into lines of at most MAX_LINE bytes and hands each to `emit` (bytes that
/// are not UTF-8 become U+FFFD; a trailing CR is dropped).
fn pump(mut source: impl Read, mut emit: impl FnMut(&str)) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut send = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line);
        emit(text.trim_end_matches('\r'));
        line.clear();
    };
    loop {
        let n = match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                send(&mut line);
            } else {
                if line.len() == MAX_LINE {
                    send(&mut line);
                }
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        send(&mut line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_sends_a_burst_per_window_and_counts_the_rest() {
        let t = Instant::now();
        let mut l = Limiter::new(3, Duration::from_secs(10));
        let at = |ms| t + Duration::from_millis(ms);
        for ms in [0, 1, 2] {
            assert_eq!(l.admit(at(ms)), Verdict::Send { suppressed: 0 });
        }
        assert_eq!(l.admit(at(3)), Verdict::Drop);
        assert_eq!(l.admit(at(9_999)), Verdict::Drop);
        // The next window: the first line carries the count of the dropped ones.
        assert_eq!(l.admit(at(10_000)), Verdict::Send { suppressed: 2 });
        assert_eq!(l.admit(at(10_001)), Verdict::Send { suppressed: 0 });
        assert_eq!(l.admit(at(10_002)), Verdict::Send { suppressed: 0 });
        assert_eq!(l.admit(at(10_003)), Verdict::Drop);
        // The stream ends: what is left is said then.
        assert_eq!(l.take_dropped(), 1);
        assert_eq!(l.take_dropped(), 0);
        // A clock that goes back (it is monotonic; still): no panic, the window holds.
        assert_eq!(l.admit(at(5)), Verdict::Drop);
        assert!(suppressed_note(7).contains("suppressed 7 lines"));
        // The parameter's text states the limit as defined here.
        let said = format!("{BURST} lines per {} s", WINDOW.as_secs());
        assert!(crate::params::master::COMMAND.longdesc.contains(&said));
    }

    #[test]
    fn lines_become_messages_and_long_ones_are_cut() {
        let mut input = b"first\r\nsecond\n\xffbad\n".to_vec();
        input.extend(vec![b'x'; MAX_LINE + 10]);
        let mut got = Vec::new();
        pump(input.as_slice(), |l| got.push(l.to_string()));
        assert_eq!(got[0], "first");
        assert_eq!(got[1], "second");
        assert_eq!(got[2], "\u{fffd}bad");
        assert_eq!(got[3].len(), MAX_LINE);
        assert_eq!(got[4], "x".repeat(10));
        assert_eq!(got.len(), 5);
    }
}
