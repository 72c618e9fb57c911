//! The resource config files of the operator commands (`/etc/hamaster/RESOURCE.toml`): the
//! master agent's parameters in TOML, unknown keys refused; the file name names the resource.

use std::path::Path;

use super::CliError;
use crate::params::master::MASTER_AGENT;
use crate::params::Values;

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
    let resource = resource
        .map(String::from)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    Ok(ConfigFile { values, resource })
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
