//! Recognising our own processes by pid: a pidfile alone is not proof, since pids are reused.

use std::fs;

/// Whether `pid` is a live (not zombie) process whose argv contains every one of `args`.
pub fn live_with_args(pid: u32, args: &[&str]) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let matches = args.iter().all(|a| argv.contains(&a.as_bytes()));
    let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true);
    matches && !zombie
}

#[cfg(test)]
mod tests {
    #[test]
    fn our_own_process_is_recognised_by_its_args_only() {
        let me = std::process::id();
        let argv0 = std::env::args_os()
            .next()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(super::live_with_args(me, &[&argv0]));
        assert!(!super::live_with_args(me, &[&argv0, "no-such-arg"]));
        assert!(!super::live_with_args(u32::MAX, &[]));
    }
}
