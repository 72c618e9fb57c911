//! Nodes with BMCs, fenced as RHEL clusters are fenced: one OpenIPMI `ipmi_sim` per lab node,
//! in the switch's namespace (outside the node: a fence never takes its own BMC down) on a
//! management address of its own on the switch (NET.(40 + i)), speaking IPMI over LAN with
//! RMCP+ (what `fence_ipmilan lanplus=1` uses). Its chassis power is the node: its
//! `chassis_control` program (lab/fence_lab --chassis) asks the fence desk (lab/src/fence.rs)
//! to cut the node's power — every process of the node killed, its links down — reads the
//! power state from the desk, and on power on marks the node on, its boot left to the test
//! (Lab::restart), as a machine boots once its power is back. Pacemaker reaches the BMCs
//! through Debian's fence_ipmilan (fence-agents 4.12, the upstream of RHEL's) and ipmitool.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::etcd::NET;

/// The BMCs' account, as an administrator gives fence_ipmilan (username=, password=).
pub const BMC_USER: &str = "admin";
pub const BMC_PASSWORD: &str = "hamaster-lab";

/// The BMC of lab node `i` (0-based): its management address.
pub fn bmc_ip(i: usize) -> String {
    format!("{NET}.{}", 41 + i)
}

/// One simulated BMC per node, killed (and its address left to the switch's end) on drop.
pub struct Bmcs {
    switch_ns: String,
    dir: PathBuf,
    /// Per node: (name, its BMC's process while it runs).
    bmcs: Vec<(String, Option<Child>)>,
    desk_dir: PathBuf,
}

impl Bmcs {
    /// A BMC for each of `nodes` (names, in the lab's order), in the switch's namespace
    /// `switch_ns`, controlling the nodes' power through the fence desk at `desk_dir`; each
    /// answers ipmitool before this returns.
    pub fn start(switch_ns: &str, dir: &Path, nodes: &[String], desk_dir: &Path) -> Bmcs {
        fs::create_dir_all(dir).unwrap();
        let mut bmcs = Bmcs {
            switch_ns: switch_ns.to_string(),
            dir: dir.to_path_buf(),
            bmcs: nodes.iter().map(|n| (n.clone(), None)).collect(),
            desk_dir: desk_dir.to_path_buf(),
        };
        for i in 0..nodes.len() {
            let ip = bmc_ip(i);
            let _ = crate::sh(
                "ip",
                &[
                    "-n",
                    switch_ns,
                    "addr",
                    "add",
                    &format!("{ip}/24"),
                    "dev",
                    "br0",
                ],
            );
            bmcs.power_up(i);
        }
        bmcs
    }

    /// Node `i`'s BMC answers again (started anew), or for the first time.
    pub fn power_up(&mut self, i: usize) {
        self.silence(i);
        let name = self.bmcs[i].0.clone();
        let here = self.dir.join(&name);
        fs::create_dir_all(here.join("state")).unwrap();
        let chassis = format!(
            "'{}/lab/fence_lab' --chassis '{}' {name}",
            crate::repo(),
            self.desk_dir.display()
        );
        fs::write(here.join("lan.conf"), lan_conf(&name, &bmc_ip(i), &chassis)).unwrap();
        fs::write(here.join("bmc.emu"), EMU).unwrap();
        let log = fs::File::create(here.join("ipmi_sim.log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.switch_ns, "ipmi_sim", "-n"])
            .arg("-c")
            .arg(here.join("lan.conf"))
            .arg("-f")
            .arg(here.join("bmc.emu"))
            .arg("-s")
            .arg(here.join("state"))
            .current_dir(&here)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("ipmi_sim (Debian's openipmi) runs");
        self.bmcs[i].1 = Some(child);
        let answers = crate::wait_for(Duration::from_secs(20), || {
            self.ipmitool(i, &["chassis", "power", "status"])
                .is_ok_and(|out| out.contains("Chassis Power is"))
        });
        // This one, not another left on the address.
        let alive = self.bmcs[i]
            .1
            .as_mut()
            .is_some_and(|c| c.try_wait().is_ok_and(|e| e.is_none()));
        assert!(
            answers && alive,
            "BMC of {name} answers ipmitool:\n{}",
            self.log(i)
        );
    }

    /// Node `i`'s BMC stops answering (its process killed): a fence through it fails.
    pub fn silence(&mut self, i: usize) {
        if let Some(mut c) = self.bmcs[i].1.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `ipmitool` as fence_ipmilan runs it, from the switch's namespace, against node `i`'s
    /// BMC: its stdout, or why it failed.
    pub fn ipmitool(&self, i: usize, args: &[&str]) -> Result<String, String> {
        let ip = bmc_ip(i);
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.switch_ns,
                "timeout",
                "10",
                "ipmitool",
            ])
            .args(["-I", "lanplus", "-C", "3", "-H", &ip, "-U", BMC_USER])
            .args([
                "-P",
                BMC_PASSWORD,
                "-L",
                "ADMINISTRATOR",
                "-N",
                "1",
                "-R",
                "1",
            ])
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// What node `i`'s BMC logged.
    pub fn log(&self, i: usize) -> String {
        let name = &self.bmcs[i].0;
        fs::read_to_string(self.dir.join(name).join("ipmi_sim.log")).unwrap_or_default()
    }
}

impl Drop for Bmcs {
    fn drop(&mut self) {
        for i in 0..self.bmcs.len() {
            self.silence(i);
        }
    }
}

/// ipmi_sim's LAN configuration for one node's BMC: one LAN channel at `ip`:623 with RMCP+
/// (a GUID is what turns it on), an administrator account, the chassis's power by `chassis`.
fn lan_conf(name: &str, ip: &str, chassis: &str) -> String {
    let auths = "none md2 md5 straight";
    format!(
        "name \"{name}\"\n\
         set_working_mc 0x20\n\
         \x20 startlan 1\n\
         \x20   addr {ip} 623\n\
         \x20   priv_limit admin\n\
         \x20   allowed_auths_callback {auths}\n\
         \x20   allowed_auths_user {auths}\n\
         \x20   allowed_auths_operator {auths}\n\
         \x20   allowed_auths_admin {auths}\n\
         \x20   guid a123456789abcdefa123456789abcdef\n\
         \x20 endlan\n\
         \x20 chassis_control \"{chassis}\"\n\
         \x20 user 2 true \"{BMC_USER}\" \"{BMC_PASSWORD}\" admin 10 {auths}\n"
    )
}

/// The BMC's management controller, as ipmi_sim's own examples define one.
const EMU: &str = "mc_setbmc 0x20\n\
                   mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n\
                   mc_enable 0x20\n";
