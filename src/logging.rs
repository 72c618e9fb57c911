//! Logging the way resource-agents' shell agents do it: `HA_LOGFACILITY` (or
//! `HA_logfacility`) selects a syslog facility, `HA_LOGFILE` appends to a file, `HA_debug`
//! enables debug lines; on a terminal, or with neither syslog nor a file, lines go to stderr.
//! Every line carries its level as `ERROR:`/`WARNING:`/`INFO:`/`DEBUG:`.

use std::fs::OpenOptions;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use log::{Level, LevelFilter, Log, Metadata, Record};
use syslog::{Facility, Formatter3164, Logger, LoggerBackend};

/// Where log lines go, decided once from the environment.
#[derive(Debug, Clone)]
pub struct Sinks {
    pub stderr: bool,
    pub syslog: Option<Facility>,
    pub file: Option<String>,
    pub debug: bool,
}

impl Sinks {
    pub fn from_env(get: impl Fn(&str) -> Option<String>, on_tty: bool) -> Sinks {
        let facility = get("HA_LOGFACILITY").or_else(|| get("HA_logfacility"));
        let syslog = facility
            .filter(|f| !f.is_empty() && f != "none")
            .and_then(|f| f.parse::<Facility>().ok());
        let file = get("HA_LOGFILE")
            .or_else(|| get("HA_logfile"))
            .filter(|f| !f.is_empty());
        let debug = get("HA_debug").is_some_and(|d| d != "0" && !d.is_empty());
        let stderr = on_tty || (syslog.is_none() && file.is_none());
        Sinks {
            stderr,
            syslog,
            file,
            debug,
        }
    }
}

struct HaLogger {
    sinks: Sinks,
    tag: String,
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
                    "{} {}[{}]: {line}",
                    timestamp(),
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

fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:03}", now.as_secs(), now.subsec_millis())
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
    fn logfile_and_debug_are_honoured() {
        let s = sinks(&[("HA_LOGFILE", "/tmp/x.log"), ("HA_debug", "1")], false);
        assert_eq!(s.file.as_deref(), Some("/tmp/x.log"));
        assert!(s.debug && !s.stderr);
        assert!(!sinks(&[("HA_debug", "0")], false).debug);
    }

    #[test]
    fn level_words_follow_ocf_log() {
        assert_eq!(level_word(Level::Warn), "WARNING");
        assert_eq!(level_word(Level::Trace), "DEBUG");
    }
}
