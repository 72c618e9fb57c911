//! A command the guard runs for the service beside it — health_command, promote_command —
//! by /bin/sh -c as the service's user, in its workdir, in a process group of its own, its
//! output discarded, killed with everything it started when it outlives its limit.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::Credentials;

/// One such command, as its parameter names it.
pub struct Hook<'a> {
    /// The parameter, for the words: "health_command exited with status 1".
    pub name: &'a str,
    pub text: &'a str,
    pub ids: &'a Option<Credentials>,
    pub workdir: &'a Path,
}

impl Hook<'_> {
    /// Runs it once with `env` added to its environment. Ok: exit status 0; Err: what happened
    /// instead, in words. Past `limit` (`within` says it in words) the whole group is killed —
    /// it is still ours: its leader is not reaped until then.
    pub async fn run(
        &self,
        env: &[(String, String)],
        limit: Duration,
        within: &str,
    ) -> Result<(), String> {
        let name = self.name;
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(self.text)
            .current_dir(self.workdir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        crate::child::service(cmd.as_std_mut(), self.ids.clone());
        let mut child = cmd.spawn().map_err(|e| format!("{name} cannot run: {e}"))?;
        // Declared after the child, so dropped before it: a run abandoned mid-way (the guard
        // stopped leading) takes its whole group with it too.
        let mut group = Group(child.id().map(|p| p as i32));
        let waited = tokio::time::timeout(limit, child.wait()).await;
        if let Ok(Ok(_)) = waited {
            group.reaped();
        }
        match waited {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("{name} {status}")),
            Ok(Err(e)) => Err(format!("{name}: cannot wait for it: {e}")),
            Err(_) => {
                let what = match group.kill() {
                    Ok(()) => "killed with its process group".to_string(),
                    Err(e) => format!("cannot kill its process group: {e}"),
                };
                // SIGKILLed: the leader is reaped at once, unless the kernel holds it (then
                // kill_on_drop and tokio's orphan reaping see to it later).
                let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
                Err(format!("{name} did not finish {within} ({what})"))
            }
        }
    }
}

/// A command's process group while its leader is unreaped (so the group's id is still ours):
/// killed whole when it is dropped.
struct Group(Option<i32>);

impl Group {
    fn kill(&mut self) -> Result<(), String> {
        let pgid = self.0.take().ok_or("no process id")?;
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .map_err(|e| e.to_string())
    }

    /// The leader was reaped: its id may be anybody's from now on.
    fn reaped(&mut self) {
        self.0 = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.0.is_some() {
            let _ = self.kill();
        }
    }
}
