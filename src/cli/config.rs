//! The resource config files of the operator commands (`/etc/hamaster/RESOURCE.toml`): the
//! master agent's parameters in TOML, unknown keys refused; the file name names the resource.

use std::path::Path;

use crate::params::master::MASTER_AGENT;
use crate::params::Values;

struct ConfigFile {
    values: Values,
    resource: String,
}

/// Reads and parses the file. On failure it prints `hamaster CMD: …` and returns the exit
/// code: 5 when the file cannot be read, 6 when its contents are wrong.
fn load(cmd: &str, path: &Path, resource: Option<&str>) -> Result<ConfigFile, i32> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        eprintln!("hamaster {cmd}: cannot read {}: {e}", path.display());
        5
    })?;
    let values = Values::from_toml(&MASTER_AGENT, &text).map_err(|e| {
        eprintln!("hamaster {cmd}: {}: {e}", path.display());
        6
    })?;
    let resource = resource
        .map(String::from)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    Ok(ConfigFile { values, resource })
}

/// `load`, then the values read as the command's configuration (`EtcdConfig::from_values`,
/// `MasterConfig::from_values`), with the resource name. A configuration that `parse`
/// refuses prints `hamaster CMD: FILE: why` and gives 6.
pub fn load_as<T, E: std::fmt::Display>(
    cmd: &str,
    path: &Path,
    resource: Option<&str>,
    parse: impl FnOnce(&Values) -> Result<T, E>,
) -> Result<(T, String), i32> {
    let file = load(cmd, path, resource)?;
    let parsed = parse(&file.values).map_err(|e| {
        eprintln!("hamaster {cmd}: {}: {e}", path.display());
        6
    })?;
    Ok((parsed, file.resource))
}
