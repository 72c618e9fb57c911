//! Which hardware watchdog this node can arm (parameters watchdog, watchdog_device), never
//! the one sbd uses: asked by the agent for the promotion score (watchdog=required) and by the
//! guard before it takes the key. The device itself is the guard's (guard::watchdog).

use std::fs;
use std::path::{Path, PathBuf};

use super::config::{WatchdogConfig, WatchdogMode};

/// What the guard leads with, chosen before it takes the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Off,
    /// These devices, to be opened when the key is ours: the first that arms is used.
    Use(Vec<PathBuf>),
    /// auto, and no device can be used: why (status and the log say it).
    Without(String),
}

/// Where sbd keeps its settings: RHEL's file, then Debian's.
pub const SBD_CONFIGS: [&str; 2] = ["/etc/sysconfig/sbd", "/etc/default/sbd"];
/// sbd's own default when SBD_WATCHDOG_DEV is not set.
const SBD_DEFAULT_DEVICE: &str = "/dev/watchdog";

/// The value of SBD_WATCHDOG_DEV in an sbd settings file (shell syntax: quotes, comments,
/// `export`), None when it is not set there.
pub fn sbd_device_in(text: &str) -> Option<String> {
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some(value) = line.strip_prefix("SBD_WATCHDOG_DEV=") else {
            continue;
        };
        let value = value.split(" #").next().unwrap_or("").trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        // The last assignment wins, as in the shell; an empty one unsets it.
        found = (!value.is_empty()).then(|| value.to_string());
    }
    found
}

/// The device sbd uses on this node, and where that was said, while sbd is enabled in systemd
/// or running: its settings' SBD_WATCHDOG_DEV, or sbd's default /dev/watchdog. An sbd that is
/// installed but neither enabled nor running (settings left behind by `pcs stonith sbd
/// disable`) holds nothing.
pub fn sbd_device() -> Option<(String, String)> {
    let why = if sbd_enabled() {
        "sbd is enabled"
    } else if sbd_runs() {
        "sbd runs"
    } else {
        return None;
    };
    // The first settings file there is is sbd's (its unit reads one): a device named in a
    // file left behind elsewhere is not what sbd uses.
    for config in SBD_CONFIGS {
        let Ok(text) = fs::read_to_string(config) else {
            continue;
        };
        return Some(match sbd_device_in(&text) {
            Some(device) => (device, format!("{why}; SBD_WATCHDOG_DEV in {config}")),
            None => (
                SBD_DEFAULT_DEVICE.to_string(),
                format!("{why}; {config} names none: its default device"),
            ),
        });
    }
    Some((
        SBD_DEFAULT_DEVICE.to_string(),
        format!("{why}; its default device"),
    ))
}

/// sbd is enabled: a unit's .wants or .requires link to sbd.service under /etc/systemd/system
/// (`pcs stonith sbd enable` makes corosync.service require it).
fn sbd_enabled() -> bool {
    let Ok(dir) = fs::read_dir("/etc/systemd/system") else {
        return false;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".wants") || name.ends_with(".requires")
        })
        .any(|e| e.path().join("sbd.service").symlink_metadata().is_ok())
}

/// A process whose name is sbd (its inquisitor and watchers all are).
fn sbd_runs() -> bool {
    let Ok(dir) = fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .any(|e| fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "sbd"))
}

/// The watchdog's number: /dev/watchdog is the legacy name of watchdog 0; a symlink counts as
/// what it points at.
pub fn index_of(device: &Path) -> Option<u32> {
    let real = fs::canonicalize(device).unwrap_or_else(|_| device.to_path_buf());
    let name = real.file_name()?.to_str()?;
    match name.strip_prefix("watchdog")? {
        "" => Some(0),
        n => n.parse().ok(),
    }
}

/// The same watchdog, by number where both have one, else by path.
fn same_device(a: &Path, b: &Path) -> bool {
    match (index_of(a), index_of(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// What sysfs says of watchdog N: None when it has no such file.
pub(crate) fn sysfs(index: u32, file: &str) -> Option<String> {
    fs::read_to_string(format!("/sys/class/watchdog/watchdog{index}/{file}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Why this device cannot be the guard's, or None when it can (as far as can be seen without
/// opening it: opening starts it).
fn unusable(device: &Path, sbd: &Option<(String, String)>) -> Option<String> {
    let shown = device.display();
    if let Some((sbd_dev, source)) = sbd {
        if same_device(device, Path::new(sbd_dev)) {
            return Some(format!("{shown} is sbd's ({source}: {sbd_dev})"));
        }
    }
    match fs::metadata(device) {
        Err(e) => return Some(format!("{shown}: {e}")),
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_char_device() {
                return Some(format!("{shown} is not a character device"));
            }
        }
    }
    if let Some(n) = index_of(device) {
        if sysfs(n, "nowayout").as_deref() == Some("1") {
            return Some(format!(
                "{shown} has nowayout set: it could not be disarmed after a demote"
            ));
        }
        if sysfs(n, "state").as_deref() == Some("active") {
            return Some(format!("{shown} is active: another process holds it"));
        }
    }
    None
}

/// The device this guard will use, or why none: checked before the key is taken.
/// Err: watchdog=required and no device can be used (the guard does not promote).
pub fn choose(cfg: &WatchdogConfig) -> Result<Choice, String> {
    if cfg.mode == WatchdogMode::Off {
        return Ok(Choice::Off);
    }
    let sbd = sbd_device();
    let candidates: Vec<PathBuf> = match &cfg.device {
        Some(d) => vec![d.clone()],
        None => present_indices()
            .into_iter()
            .map(|n| PathBuf::from(format!("/dev/watchdog{n}")))
            .collect(),
    };
    let mut reasons = Vec::new();
    let mut usable = Vec::new();
    for d in candidates {
        match unusable(&d, &sbd) {
            None => usable.push(d),
            Some(why) => reasons.push(why),
        }
    }
    let outcome = match (usable.is_empty(), reasons.is_empty()) {
        (false, _) => Ok(usable),
        (true, true) => Err("no watchdog device on this node".to_string()),
        (true, false) => Err(reasons.join("; ")),
    };
    match (outcome, cfg.mode) {
        (Ok(d), _) => Ok(Choice::Use(d)),
        (Err(why), WatchdogMode::Required) => Err(format!("watchdog=required: {why}")),
        (Err(why), _) => Ok(Choice::Without(why)),
    }
}

/// The watchdogs the kernel has, by number.
fn present_indices() -> Vec<u32> {
    let mut found: Vec<u32> = fs::read_dir("/sys/class/watchdog")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_prefix("watchdog")?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbd_settings_are_read_the_way_the_shell_reads_them() {
        assert_eq!(
            sbd_device_in("SBD_DELAY_START=no\nSBD_WATCHDOG_DEV=/dev/watchdog1\n").as_deref(),
            Some("/dev/watchdog1")
        );
        assert_eq!(
            sbd_device_in("export SBD_WATCHDOG_DEV=\"/dev/watchdog0\" # the esb\n").as_deref(),
            Some("/dev/watchdog0")
        );
        assert_eq!(sbd_device_in("#SBD_WATCHDOG_DEV=/dev/watchdog\n"), None);
        assert_eq!(
            sbd_device_in("SBD_WATCHDOG_DEV=/dev/watchdog\nSBD_WATCHDOG_DEV=\n"),
            None
        );
    }

    #[test]
    fn the_legacy_name_is_watchdog_zero() {
        assert_eq!(index_of(Path::new("/dev/watchdog")), Some(0));
        assert_eq!(index_of(Path::new("/dev/watchdog3")), Some(3));
        assert_eq!(index_of(Path::new("/dev/null")), None);
        assert!(same_device(
            Path::new("/dev/watchdog"),
            Path::new("/dev/watchdog0")
        ));
    }
}
