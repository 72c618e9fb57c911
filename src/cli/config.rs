//! Where the operator commands find a resource's parameters: on a cluster node, the CIB (the
//! primitive's instance attributes, as Pacemaker passes them to the agent); on the cold standby,
//! its config file (`/etc/hamaster/RESOURCE.toml`): the master agent's parameters in TOML,
//! unknown keys refused; the file name names the resource.

use std::path::{Path, PathBuf};

use super::CliError;
use crate::params::master::MASTER_AGENT;
use crate::params::Values;
use crate::resource::config::MasterConfig;

/// The cold standby's resource file and names, as `hamaster takeover` and `hamaster campaign`
/// take them.
#[derive(Debug, clap::Args)]
pub struct ResourceFile {
    /// Resource configuration (TOML: the master agent's parameters; unknown keys are errors).
    #[arg(long)]
    pub config: PathBuf,
    /// Resource name; default: the config file's name without extension.
    #[arg(long)]
    pub resource: Option<String>,
    /// Node name written into the leader key; default: this host's name.
    #[arg(long)]
    pub node: Option<String>,
}

impl ResourceFile {
    /// The resource's name as the file is read with it (for log lines before it is read).
    pub fn name(&self) -> String {
        resource_name(&self.config, self.resource.as_deref())
    }

    /// The node's name for the leader key: given, or this host's name.
    pub fn node(&self) -> String {
        self.node.clone().unwrap_or_else(crate::logging::host_name)
    }

    /// The file read and parsed by `parse`, and the resource's name.
    pub fn load_as<T, E: std::fmt::Display>(
        &self,
        parse: impl FnOnce(&Values) -> Result<T, E>,
    ) -> Result<(T, String), CliError> {
        load_as(&self.config, self.resource.as_deref(), parse)
    }

    /// The master's configuration as takeover and campaign run it: a cold standby, whose
    /// service starts with the role (standby=warm is the master agent's resident standby).
    pub fn load_cold(&self) -> Result<(MasterConfig, String), CliError> {
        let (config, resource) = self.load_as(MasterConfig::from_values)?;
        if config.standby.is_warm() {
            return Err(CliError::Config {
                path: self.config.clone(),
                detail: "standby=warm: only ocf:hamaster:master runs a resident standby; here \
                         the service starts with the role: leave standby out"
                    .into(),
            });
        }
        Ok((config, resource))
    }
}

/// A resource's name: given, or the config file's name without extension.
fn resource_name(path: &Path, resource: Option<&str>) -> String {
    resource
        .map(String::from)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

struct ConfigFile {
    values: Values,
    resource: String,
}

/// Reads and parses the file: unreadable, or its contents wrong.
fn load(path: &Path, resource: Option<&str>) -> Result<ConfigFile, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let values = Values::from_toml(&MASTER_AGENT, &text).map_err(|e| CliError::Config {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let resource = resource_name(path, resource);
    Ok(ConfigFile { values, resource })
}

/// The bound of one cibadmin run.
const CIB_LOOK: std::time::Duration = std::time::Duration::from_secs(5);

/// This node's CIB's resources section (`cibadmin --query --scope resources`).
pub fn cib_resources() -> Result<String, CliError> {
    crate::service::tool_output(CIB_LOOK, "cibadmin", &["--query", "--scope", "resources"])
        .ok_or_else(|| {
            CliError::CibUnreadable(
                "`cibadmin --query` did not answer: no cluster runs on this node (for the cold \
                 standby, name its file with --config)"
                    .into(),
            )
        })
}

/// The parameters of the `ocf:hamaster:master` primitive `resource` from this node's CIB
/// (`cibadmin --query --scope resources`), read as the command's configuration.
pub fn from_cib<T, E: std::fmt::Display>(
    resource: &str,
    parse: impl FnOnce(&Values) -> Result<T, E>,
) -> Result<T, CliError> {
    from_resources(&cib_resources()?, resource, parse)
}

/// As from_cib, from a resources section already read.
pub fn from_resources<T, E: std::fmt::Display>(
    xml: &str,
    resource: &str,
    parse: impl FnOnce(&Values) -> Result<T, E>,
) -> Result<T, CliError> {
    let pairs = master_params_in(xml, resource).ok_or_else(|| CliError::NotInCib {
        resource: resource.to_string(),
    })?;
    parse(&Values::from_cib(&MASTER_AGENT, pairs)).map_err(|e| CliError::CibValue {
        resource: resource.to_string(),
        detail: e.to_string(),
    })
}

/// The instance attributes of the primitive `resource` of agent ocf:hamaster:master in a CIB
/// resources section (a clone's or group's primitive as well). Sets guarded by a rule are
/// skipped — which one applies depends on the node and the time — and the first value of a
/// name wins, as in Pacemaker's unscored sets. None: no such primitive.
pub fn master_params_in(xml: &str, resource: &str) -> Option<Vec<(String, String)>> {
    use crate::failsafe::clearance::attr;
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut found = false;
    // Depth inside the matching primitive (0: outside it).
    let mut depth = 0usize;
    let mut pairs: Vec<(String, String)> = Vec::new();
    // The current instance_attributes set's pairs, and whether a rule guards it.
    let mut set: Option<(Vec<(String, String)>, bool)> = None;
    loop {
        let event = reader.read_event().ok()?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                let name = e.name();
                if depth == 0 {
                    if name.as_ref() == b"primitive"
                        && attr(e, "id").as_deref() == Some(resource)
                        && attr(e, "class").as_deref() == Some("ocf")
                        && attr(e, "provider").as_deref() == Some("hamaster")
                        && attr(e, "type").as_deref() == Some("master")
                    {
                        found = true;
                        if !empty {
                            depth = 1;
                        }
                    }
                    continue;
                }
                match name.as_ref() {
                    b"instance_attributes" if depth == 1 && !empty => {
                        set = Some((Vec::new(), false))
                    }
                    b"rule" => {
                        if let Some((_, ruled)) = set.as_mut() {
                            *ruled = true;
                        }
                    }
                    b"nvpair" => {
                        if let (Some((vals, _)), Some(n)) = (set.as_mut(), attr(e, "name")) {
                            vals.push((n, attr(e, "value").unwrap_or_default()));
                        }
                    }
                    _ => {}
                }
                if !empty {
                    depth += 1;
                }
            }
            Event::End(ref e) if depth > 0 => {
                depth -= 1;
                if depth == 1 && e.name().as_ref() == b"instance_attributes" {
                    if let Some((vals, false)) = set.take() {
                        for (k, v) in vals {
                            if !pairs.iter().any(|(n, _)| *n == k) {
                                pairs.push((k, v));
                            }
                        }
                    }
                }
                if depth == 0 {
                    break;
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    found.then_some(pairs)
}

/// `load`, then the values read as the command's configuration (`EtcdConfig::from_values`,
/// `MasterConfig::from_values`), with the resource name; a configuration that `parse`
/// refuses is named with the file.
pub fn load_as<T, E: std::fmt::Display>(
    path: &Path,
    resource: Option<&str>,
    parse: impl FnOnce(&Values) -> Result<T, E>,
) -> Result<(T, String), CliError> {
    let file = load(path, resource)?;
    let parsed = parse(&file.values).map_err(|e| CliError::Config {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    Ok((parsed, file.resource))
}

#[cfg(test)]
mod tests {
    use super::*;

    // As `cibadmin --query --scope resources` prints them (pcs's ids).
    const CIB: &str = r##"<resources>
  <primitive id="api-vip" class="ocf" type="IPaddr2" provider="heartbeat">
    <instance_attributes id="api-vip-instance_attributes">
      <nvpair id="api-vip-ip" name="ip" value="192.0.2.99"/>
    </instance_attributes>
  </primitive>
  <clone id="api-clone">
    <primitive id="api" class="ocf" type="master" provider="hamaster">
      <instance_attributes id="api-rules">
        <rule id="api-rule" score="0"><expression id="e" attribute="#uname" operation="eq" value="n1"/></rule>
        <nvpair id="api-rules-ip" name="ip" value="198.51.100.7"/>
      </instance_attributes>
      <instance_attributes id="api-instance_attributes">
        <nvpair id="api-etcd" name="etcd_endpoints" value="https://10.0.0.1:2379,https://10.0.0.2:2379"/>
        <nvpair id="api-ip" name="ip" value="192.0.2.10"/>
        <nvpair id="api-odd" name="args" value="a &amp; b"/>
      </instance_attributes>
      <instance_attributes id="api-later">
        <nvpair id="api-ip2" name="ip" value="192.0.2.11"/>
        <nvpair id="api-ttl" name="lease_ttl" value="12"/>
      </instance_attributes>
      <operations>
        <op id="api-monitor" name="monitor" interval="10s" role="Promoted"/>
      </operations>
    </primitive>
    <meta_attributes id="api-clone-meta"><nvpair id="m" name="promotable" value="true"/></meta_attributes>
  </clone>
  <primitive id="other" class="ocf" type="master" provider="hamaster"/>
</resources>"##;

    #[test]
    fn the_cibs_parameters_of_a_master_primitive_and_nothing_else() {
        let got = master_params_in(CIB, "api").unwrap();
        let want = [
            (
                "etcd_endpoints",
                "https://10.0.0.1:2379,https://10.0.0.2:2379",
            ),
            ("ip", "192.0.2.10"),
            ("args", "a & b"),
            ("lease_ttl", "12"),
        ];
        assert_eq!(
            got,
            want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()
        );
        // Another agent's primitive, an empty one, none at all.
        assert_eq!(master_params_in(CIB, "api-vip"), None);
        assert_eq!(master_params_in(CIB, "other"), Some(Vec::new()));
        assert_eq!(master_params_in(CIB, "nosuch"), None);
        assert_eq!(master_params_in("", "api"), None);
        // What the CLI reads from them: the agent's own parameter names only.
        let values = Values::from_cib(&MASTER_AGENT, got);
        let ip = MASTER_AGENT.iter().find(|p| p.name == "ip").unwrap();
        assert_eq!(values.get(ip), Some("192.0.2.10"));
    }
}
