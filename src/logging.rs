//! Logging the way resource-agents' shell agents do it: `HA_LOGFACILITY` (or
//! `HA_logfacility`) selects a syslog facility, `HA_LOGFILE` (or `HA_logfile`) appends to a
//! file, `none` in either turns it off (Pacemaker 1.1 exports `HA_logfile=none`), `HA_debug`
//! enables debug lines; on a terminal, or with neither syslog nor a file, lines go to stderr.
//! Every line carries its level as `ERROR:`/`WARNING:`/`INFO:`/`DEBUG:`. Lines in the file
//! read like Pacemaker's own beside them: local time as `Dec 01 08:01:07.123`, the node, the
//! program and its pid (or in `HA_DATEFMT`, as resource-agents' `hadate` does, when it is set).

use std::fs::OpenOptions;
use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};
use syslog::{Facility, Formatter3164, Logger, LoggerBackend};

/// Where log lines go, decided once from the environment.
#[derive(Debug, Clone)]
pub struct Sinks {
    pub stderr: bool,
    pub syslog: Option<Facility>,
    pub file: Option<String>,
    pub debug: bool,
    /// resource-agents' time stamp format for the file (strftime), when set.
    pub datefmt: Option<String>,
    /// Where a supervised command's output goes under its own identifier: HA_LOGFACILITY's
    /// facility, `daemon` when it is not set; None when it is `none`.
    pub service_syslog: Option<Facility>,
}

impl Sinks {
    pub fn from_env(get: impl Fn(&str) -> Option<String>, on_tty: bool) -> Sinks {
        let facility = get("HA_LOGFACILITY").or_else(|| get("HA_logfacility"));
        let service_syslog = match facility.as_deref() {
            Some("none") => None,
            Some(f) => Some(f.parse::<Facility>().unwrap_or(Facility::LOG_DAEMON)),
            None => Some(Facility::LOG_DAEMON),
        };
        let syslog = facility
            .filter(|f| !f.is_empty() && f != "none")
            .and_then(|f| f.parse::<Facility>().ok());
        let file = get("HA_LOGFILE")
            .or_else(|| get("HA_logfile"))
            .filter(|f| !f.is_empty() && f != "none");
        let debug = get("HA_debug").is_some_and(|d| d != "0" && !d.is_empty());
        let stderr = on_tty || (syslog.is_none() && file.is_none());
        Sinks {
            stderr,
            syslog,
            file,
            debug,
            datefmt: get("HA_DATEFMT").filter(|f| !f.is_empty()),
            service_syslog,
        }
    }
}

struct HaLogger {
    sinks: Sinks,
    tag: String,
    /// The node's name as the kernel has it (per UTS namespace), as Pacemaker's lines show it;
    /// read for the first line to a file: most agent calls (a healthy monitor) log nothing.
    node: OnceLock<String>,
    /// Connected on first use: most agent calls (a healthy monitor) log nothing.
    syslog: Mutex<Option<Logger<LoggerBackend, Formatter3164>>>,
}

pub fn level_word(level: Level) -> &'static str {
    match level {
        Level::Error => "ERROR",
        Level::Warn => "WARNING",
        Level::Info => "INFO",
        Level::Debug | Level::Trace => "DEBUG",
    }
}

impl Log for HaLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        // Libraries' chatter (netlink-packet-route warns about every newer kernel attribute)
        // is not the administrator's business; only hamaster's own lines are logged.
        let ours = m.target().starts_with("hamaster");
        let max = if self.sinks.debug {
            Level::Debug
        } else {
            Level::Info
        };
        ours && m.level() <= max
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format!("{}: {}", level_word(record.level()), record.args());
        if self.sinks.stderr {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        if let Some(path) = &self.sinks.file {
            if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
                let _ = writeln!(
                    f,
                    "{} {} {}[{}]: {line}",
                    timestamp(self.sinks.datefmt.as_deref(), now_unix()),
                    self.node.get_or_init(host_name),
                    self.tag,
                    std::process::id()
                );
            }
        }
        if let Some(facility) = self.sinks.syslog {
            self.to_syslog(facility, record.level(), &line);
        }
    }

    fn flush(&self) {}
}

impl HaLogger {
    fn to_syslog(&self, facility: Facility, level: Level, line: &str) {
        let Ok(mut guard) = self.syslog.lock() else {
            return;
        };
        if guard.is_none() {
            let formatter = Formatter3164 {
                facility,
                hostname: None,
                process: self.tag.clone(),
                pid: std::process::id(),
            };
            *guard = syslog::unix(formatter).ok();
        }
        if let Some(logger) = guard.as_mut() {
            let _ = match level {
                Level::Error => logger.err(line),
                Level::Warn => logger.warning(line),
                Level::Info => logger.info(line),
                Level::Debug | Level::Trace => logger.debug(line),
            };
        }
    }
}

fn now_unix() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Local time at `at` (since the epoch): Pacemaker's `%b %d %T` with milliseconds, or
/// `datefmt` through strftime (resource-agents' HA_DATEFMT, whose default `%b %d %T ` ends in
/// a space).
fn timestamp(datefmt: Option<&str>, at: std::time::Duration) -> String {
    let fmt = datefmt.unwrap_or("%b %d %T");
    let Ok(cfmt) = std::ffi::CString::new(fmt) else {
        return format!("{}.{:03}", at.as_secs(), at.subsec_millis());
    };
    // SAFETY: localtime_r fills the tm we own from a plain integer; strftime writes at most
    // buf.len() bytes into buf and returns how many it wrote (0 when it did not fit).
    let text = unsafe {
        let t = at.as_secs() as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        let mut buf = [0u8; 128];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &tm);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    match datefmt {
        Some(_) => text.trim_end().to_string(),
        None => format!("{text}.{:03}", at.subsec_millis()),
    }
}

/// The kernel's host name (this UTS namespace's), "localhost" when it cannot be read: the
/// node's name where no cluster names it (the log's lines, the cold standby, a node outside
/// Pacemaker).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// A syslog connection (/dev/log: journald's, rsyslog's) for a supervised command's output
/// under its own identifier and pid, as a systemd unit's output is: `journalctl -t api`
/// shows the service, Pacemaker's log does not. None where HA_LOGFACILITY is `none` or no
/// syslog socket answers: the output then goes to the guard's own log.
pub fn service_syslog(identifier: &str, pid: u32) -> Option<Logger<LoggerBackend, Formatter3164>> {
    let sinks = Sinks::from_env(|k| std::env::var(k).ok(), false);
    let formatter = Formatter3164 {
        facility: sinks.service_syslog?,
        hostname: None,
        process: identifier.to_string(),
        pid,
    };
    syslog::unix(formatter).ok()
}

/// Installs the logger once for this process. `tag` names the program in syslog, e.g.
/// `hamaster-vip(api-vip)`.
pub fn init(tag: &str) {
    let sinks = Sinks::from_env(|k| std::env::var(k).ok(), std::io::stderr().is_terminal());
    let max = if sinks.debug {
        LevelFilter::Debug
    } else {
        LevelFilter::Info
    };
    let logger = HaLogger {
        sinks,
        tag: tag.to_string(),
        node: OnceLock::new(),
        syslog: Mutex::new(None),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sinks(vars: &[(&str, &str)], tty: bool) -> Sinks {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Sinks::from_env(
            |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
            tty,
        )
    }

    #[test]
    fn without_facility_or_file_lines_go_to_stderr() {
        let s = sinks(&[], false);
        assert!(s.stderr && s.syslog.is_none() && s.file.is_none() && !s.debug);
    }

    #[test]
    fn facility_selects_syslog_and_none_disables_it() {
        let s = sinks(&[("HA_LOGFACILITY", "daemon")], false);
        assert!(matches!(s.syslog, Some(Facility::LOG_DAEMON)));
        assert!(!s.stderr);
        assert!(matches!(
            sinks(&[("HA_logfacility", "local5")], false).syslog,
            Some(Facility::LOG_LOCAL5)
        ));
        assert!(sinks(&[("HA_LOGFACILITY", "none")], false).stderr);
        assert!(
            sinks(&[("HA_LOGFACILITY", "daemon")], true).stderr,
            "a terminal always sees the lines"
        );
    }

    #[test]
    fn the_services_output_goes_to_syslog_unless_the_facility_is_none() {
        let facility = |vars: &[(&str, &str)]| sinks(vars, false).service_syslog;
        assert!(matches!(facility(&[]), Some(Facility::LOG_DAEMON)));
        assert!(matches!(
            facility(&[("HA_LOGFACILITY", "local3")]),
            Some(Facility::LOG_LOCAL3)
        ));
        assert!(facility(&[("HA_LOGFACILITY", "none")]).is_none());
        assert!(matches!(
            facility(&[("HA_LOGFACILITY", "bogus")]),
            Some(Facility::LOG_DAEMON)
        ));
    }

    #[test]
    fn logfile_and_debug_are_honoured() {
        let s = sinks(&[("HA_LOGFILE", "/tmp/x.log"), ("HA_debug", "1")], false);
        assert_eq!(s.file.as_deref(), Some("/tmp/x.log"));
        assert!(s.debug && !s.stderr);
        assert!(!sinks(&[("HA_debug", "0")], false).debug);
    }

    #[test]
    fn none_turns_the_file_off_as_pacemaker_1_1_exports_it() {
        assert!(sinks(&[("HA_logfile", "none")], false).file.is_none());
        assert!(sinks(&[("HA_LOGFILE", "none")], false).stderr);
    }

    #[test]
    fn file_time_stamps_read_like_pacemakers() {
        // 2026-12-01 08:01:07.123 UTC, shown in local time.
        let at = std::time::Duration::from_millis(1_796_112_067_123);
        let ts = timestamp(None, at);
        let words: Vec<&str> = ts.split(' ').collect();
        assert_eq!(words.len(), 3, "{ts}");
        assert!(
            ["Nov", "Dec"].contains(&words[0]) && words[1].len() == 2,
            "month and day: {ts}"
        );
        let (hms, ms) = words[2].split_once('.').expect("milliseconds");
        assert_eq!((hms.len(), ms), (8, "123"), "{ts}");
        assert_eq!(hms.matches(':').count(), 2);
        // HA_DATEFMT as resource-agents' hadate uses it (its trailing space dropped).
        assert_eq!(timestamp(Some("%Y"), at), "2026");
        assert_eq!(
            timestamp(Some("%b %d %T "), at),
            ts.split('.').next().unwrap()
        );
    }

    #[test]
    fn level_words_follow_ocf_log() {
        assert_eq!(level_word(Level::Warn), "WARNING");
        assert_eq!(level_word(Level::Trace), "DEBUG");
    }
}
