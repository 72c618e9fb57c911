//! The witness: what this node's corosync says of the cluster — whether its partition is
//! quorate, which nodes are in its membership (and under which ring), and the nodelist they
//! should all be in. Read with `corosync-quorumtool -s` (exit 0 quorate, 2 not, 1 an error)
//! and `corosync-cmapctl -b nodelist.node`, each within a bound; what it means is decided by
//! the guard machine (a proof: guard::machine::hold) and the takeover rule (clearance), never
//! here.

use std::time::Duration;

/// A node of the nodelist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its node id (None: the entry has none — corosync 2's udpu allows that — so it can never
    /// be shown in a membership, which lists ids).
    pub id: Option<u32>,
    pub name: String,
}

/// What corosync said, at one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub quorate: bool,
    /// The membership's ring id ("1.2c"): a new ring is a new membership.
    pub ring: String,
    /// This node's id.
    pub me: u32,
    /// Node ids in this node's membership.
    pub members: Vec<u32>,
    /// The nodelist, as configured.
    pub nodelist: Vec<Node>,
    /// totem.cluster_name (None: not set): which cluster this is.
    pub name: Option<String>,
    /// How long this corosync takes to form a membership without a node it lost (runtime
    /// token + consensus + join). None: not read.
    pub membership_time: Option<Duration>,
}

impl Cluster {
    /// Nodes of the nodelist missing from the membership (an entry without a node id always
    /// is), by name.
    pub fn missing(&self) -> Vec<String> {
        self.nodelist
            .iter()
            .filter(|n| n.id.is_none_or(|id| !self.members.contains(&id)))
            .map(|n| n.name.clone())
            .collect()
    }

    /// Whether the node of that id is in the membership (None: not in the nodelist).
    pub fn has_id(&self, id: u32) -> Option<bool> {
        self.nodelist
            .iter()
            .any(|n| n.id == Some(id))
            .then(|| self.members.contains(&id))
    }

    /// Whether the node of that name is in the membership (None: not in the nodelist).
    pub fn has_member(&self, name: &str) -> Option<bool> {
        let node = self.nodelist.iter().find(|n| n.name == name)?;
        Some(node.id.is_some_and(|id| self.members.contains(&id)))
    }

    /// The nodelist's ids, sorted (entries without one left out).
    pub fn ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.nodelist.iter().filter_map(|n| n.id).collect();
        ids.sort_unstable();
        ids
    }

    /// In words, for the log: "quorate, 3 of 3 nodes (ring 1.2c)".
    pub fn describe(&self) -> String {
        let missing = self.missing();
        format!(
            "{}, {} of {} nodes{} (ring {})",
            if self.quorate {
                "quorate"
            } else {
                "not quorate"
            },
            self.nodelist.len() - missing.len(),
            self.nodelist.len(),
            if missing.is_empty() {
                String::new()
            } else {
                format!(", missing {}", missing.join(", "))
            },
            self.ring
        )
    }
}

/// A three-node cluster (n1, n2, n3) as node `me` sees it with `members` (quorate with two):
/// for the tests of the machine, the takeover rule and the simulation.
#[cfg(test)]
pub fn three_nodes(me: u32, members: &[u32], ring: &str) -> Cluster {
    Cluster {
        quorate: members.len() >= 2,
        ring: ring.into(),
        me,
        members: members.to_vec(),
        nodelist: (1..=3)
            .map(|id| Node {
                id: Some(id),
                name: format!("n{id}"),
            })
            .collect(),
        name: Some("lab".into()),
        membership_time: Some(Duration::from_millis(3680)),
    }
}

/// The two tools' outputs read into a `Cluster`; Err says what could not be read. `code` is
/// corosync-quorumtool's exit status (0 quorate, 2 not quorate); `cmap` is corosync-cmapctl's
/// listing of the nodelist, the cluster's name and its runtime totem timings.
pub fn read(code: Option<i32>, status: &str, cmap: &str) -> Result<Cluster, String> {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let quorate = match (code, field("Quorate").as_deref()) {
        (Some(0), Some("Yes")) => true,
        (Some(2), Some("No")) => false,
        (c, q) => {
            return Err(format!(
                "corosync-quorumtool -s: exit {c:?}, Quorate {q:?}: not an answer"
            ))
        }
    };
    let ring = field("Ring ID").ok_or("corosync-quorumtool -s: no Ring ID")?;
    let me = field("Node ID")
        .and_then(|v| v.parse().ok())
        .ok_or("corosync-quorumtool -s: no Node ID")?;
    // The table after "Membership information": a header line starting with "Nodeid", then
    // one row per member whose first column is its id.
    let mut members = Vec::new();
    let mut in_table = false;
    for line in status.lines() {
        let first = line.split_whitespace().next();
        match first {
            Some("Nodeid") => in_table = true,
            Some(word) if in_table => match word.parse::<u32>() {
                Ok(id) => members.push(id),
                Err(_) => in_table = false,
            },
            _ => {}
        }
    }
    if members.is_empty() {
        return Err("corosync-quorumtool -s: no membership listed".into());
    }
    let nodelist = read_nodelist(cmap)?;
    Ok(Cluster {
        quorate,
        ring,
        me,
        members,
        nodelist,
        name: crate::lease::cluster::text_of(cmap, "totem.cluster_name"),
        membership_time: crate::lease::cluster::membership_time_from(cmap),
    })
}

/// `corosync-cmapctl -b nodelist.node` lines such as `nodelist.node.0.nodeid (u32) = 1` and
/// `nodelist.node.0.name (str) = n1`, into nodes (a node without a name goes by its ring0
/// address, as corosync shows it; one without a node id is kept, and never a member).
fn read_nodelist(text: &str) -> Result<Vec<Node>, String> {
    /// One slot of the nodelist: its id, name and ring0 address, as far as read.
    type Slot = (Option<u32>, Option<String>, Option<String>);
    let mut slots: std::collections::BTreeMap<u32, Slot> = Default::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.split_whitespace().next().unwrap_or("");
        let mut parts = key.split('.');
        let (Some("nodelist"), Some("node"), Some(slot), Some(what)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Ok(slot) = slot.parse::<u32>() else {
            continue;
        };
        let value = value.trim().to_string();
        let e = slots.entry(slot).or_default();
        match what {
            "nodeid" => e.0 = value.parse().ok(),
            "name" => e.1 = Some(value),
            "ring0_addr" => e.2 = Some(value),
            _ => {}
        }
    }
    let nodes: Vec<Node> = slots
        .into_values()
        .filter_map(|(id, name, addr)| {
            Some(Node {
                id,
                name: name.or(addr).or(id.map(|i| format!("nodeid {i}")))?,
            })
        })
        .collect();
    match nodes.is_empty() {
        true => Err("corosync-cmapctl: no nodelist".into()),
        false => Ok(nodes),
    }
}

/// Asks this node's corosync, both tools within `limit`. Err: no answer in time, or none that
/// could be read (the machine takes it as "cannot tell").
pub async fn ask(limit: Duration) -> Result<Cluster, String> {
    let run = |program: &'static str, args: &'static [&'static str]| async move {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = cmd
            .output()
            .await
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        Ok::<_, String>((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ))
    };
    let both = async {
        let (status, cmap) = tokio::join!(
            run("corosync-quorumtool", &["-s"]),
            run(
                "corosync-cmapctl",
                &[
                    "-b",
                    "nodelist.node",
                    "totem.cluster_name",
                    "runtime.config.totem."
                ]
            )
        );
        let (code, status) = status?;
        let (_, cmap) = cmap?;
        read(code, &status, &cmap)
    };
    match tokio::time::timeout(limit, both).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "corosync did not answer within {} ms",
            limit.as_millis()
        )),
    }
}

/// The same, for a caller without a runtime (the takeover's checks).
pub fn ask_blocking(limit: Duration) -> Result<Cluster, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(ask(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// corosync 3.1.7's `corosync-quorumtool -s` on a whole three-node cluster (lab).
    pub const WHOLE: &str = "Quorum information
------------------
Date:             Wed Dec  2 08:24:53 2026
Quorum provider:  corosync_votequorum
Nodes:            3
Node ID:          1
Ring ID:          1.d
Quorate:          Yes

Votequorum information
----------------------
Expected votes:   3
Highest expected: 3
Total votes:      3
Quorum:           2  
Flags:            Quorate 

Membership information
----------------------
    Nodeid      Votes Name
         1          1 n1 (local)
         2          1 n2
         3          1 n3
";

    /// The node cut off from the other two, 3.6 s after the cut.
    const ALONE: &str = "Quorum information
------------------
Nodes:            1
Node ID:          3
Ring ID:          3.11
Quorate:          No

Votequorum information
----------------------
Expected votes:   3
Total votes:      1
Quorum:           2 Activity blocked
Flags:            

Membership information
----------------------
    Nodeid      Votes    Qdevice Name
         3          1         NR n3 (local)
";

    pub const NODELIST: &str = "nodelist.node.0.name (str) = n1
nodelist.node.0.nodeid (u32) = 1
nodelist.node.0.ring0_addr (str) = 198.51.100.11
nodelist.node.1.name (str) = n2
nodelist.node.1.nodeid (u32) = 2
nodelist.node.1.ring0_addr (str) = 198.51.100.12
nodelist.node.2.nodeid (u32) = 3
nodelist.node.2.ring0_addr (str) = 198.51.100.13
totem.cluster_name (str) = lab
runtime.config.totem.consensus (u32) = 1980
runtime.config.totem.join (u32) = 50
runtime.config.totem.token (u32) = 1650
";

    #[test]
    fn a_whole_cluster_reads_as_quorate_with_every_node() {
        let c = read(Some(0), WHOLE, NODELIST).unwrap();
        assert!(c.quorate);
        assert_eq!((c.me, c.ring.as_str()), (1, "1.d"));
        assert_eq!(c.members, [1, 2, 3]);
        assert!(c.missing().is_empty());
        // A node without a name goes by its address.
        assert_eq!(c.nodelist[2].name, "198.51.100.13");
        assert_eq!(c.has_member("n2"), Some(true));
        assert_eq!(c.has_member("n9"), None);
        assert_eq!((c.has_id(3), c.has_id(9)), (Some(true), None));
        assert_eq!(c.ids(), [1, 2, 3]);
        assert_eq!(c.name.as_deref(), Some("lab"));
        assert_eq!(c.membership_time, Some(Duration::from_millis(3680)));
        assert_eq!(c.describe(), "quorate, 3 of 3 nodes (ring 1.d)");
    }

    #[test]
    fn a_nodelist_entry_without_a_node_id_is_never_in_the_membership() {
        // corosync 2's udpu allows an entry without a nodeid: it cannot be matched with the
        // membership's ids, so the cluster never reads as whole (no proof, no hold).
        let without = NODELIST.replace("nodelist.node.2.nodeid (u32) = 3\n", "");
        let c = read(Some(0), WHOLE, &without).unwrap();
        assert_eq!(c.nodelist.len(), 3);
        assert_eq!(c.missing(), ["198.51.100.13"]);
        assert_eq!(c.has_member("198.51.100.13"), Some(false));
        assert_eq!(c.ids(), [1, 2]);
        // Without the name and timings: unknown, not made up.
        let bare: String = NODELIST
            .lines()
            .filter(|l| !l.starts_with("totem") && !l.starts_with("runtime"))
            .map(|l| format!("{l}\n"))
            .collect();
        let c = read(Some(0), WHOLE, &bare).unwrap();
        assert_eq!((c.name, c.membership_time), (None, None));
    }

    #[test]
    fn a_node_alone_reads_as_not_quorate_and_missing_the_others() {
        let c = read(Some(2), ALONE, NODELIST).unwrap();
        assert!(!c.quorate);
        assert_eq!(c.members, [3]);
        assert_eq!(c.missing(), ["n1", "n2"]);
        assert_eq!(
            c.describe(),
            "not quorate, 1 of 3 nodes, missing n1, n2 (ring 3.11)"
        );
    }

    #[test]
    fn anything_else_is_no_answer() {
        // The exit status and the Quorate line disagree, or the tool failed.
        assert!(read(Some(0), ALONE, NODELIST).is_err());
        assert!(read(Some(1), "", NODELIST).is_err());
        assert!(read(None, WHOLE, NODELIST).is_err());
        // No membership table, or no nodelist.
        let cut = WHOLE.split("Membership").next().unwrap();
        assert!(read(Some(0), cut, NODELIST).is_err());
        assert!(read(Some(0), WHOLE, "").is_err());
    }
}
