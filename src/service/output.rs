//! The supervised command's output: every line it writes to stdout or stderr goes to syslog
//! under the resource's name as its identifier and the service's pid (`journalctl -t api`),
//! as a systemd unit's output goes to the journal under its own name — not into Pacemaker's
//! log. Where no syslog answers (or HA_LOGFACILITY is `none`) the lines go to the guard's log
//! instead, tagged `{resource} service:`. Nothing is kept in /run. Each stream is read by a
//! thread of its own, so a chatty service or a slow log sink never stalls the guard's other
//! work.

use std::io::Read;

/// Longer lines are cut into pieces of this size, each a message of its own.
const MAX_LINE: usize = 8 * 1024;

/// Forwards `source` line by line until it closes (the service exited).
pub fn forward(source: impl Read + Send + 'static, resource: String, pid: u32) {
    let name = format!("{resource} output");
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let tag = format!("{resource} service");
        let mut syslog = crate::logging::service_syslog(&resource, pid);
        pump(source, |line| {
            if let Some(logger) = syslog.as_mut() {
                if logger.info(line).is_ok() {
                    return;
                }
                log::warn!("{tag}: syslog stopped taking its output: in this log from now on");
                syslog = None;
            }
            log::info!("{tag}: {line}");
        })
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
