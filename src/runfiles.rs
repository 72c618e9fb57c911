//! Files under the run directory (`/run/hamaster`, tmpfs): root's alone. Directories are
//! 0700 and files 0600 — they hold fencing tokens, leases and pids — whatever the umask.

use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where hamaster keeps runtime state: `HAMASTER_RUN_DIR`, or `/run/hamaster`. The one
/// definition of the run directory's root.
pub fn root() -> PathBuf {
    std::env::var_os("HAMASTER_RUN_DIR")
        .map_or_else(|| PathBuf::from("/run/hamaster"), PathBuf::from)
}

/// Creates `dir` and any missing parents 0700, and makes `dir` itself 0700 if it existed.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    fs::set_permissions(dir, Permissions::from_mode(0o700))
}

/// Opens `path` for writing, truncated, 0600 (also when it existed with another mode).
pub fn create_private(path: &Path) -> io::Result<fs::File> {
    private_file(path, true)
}

/// Opens `path` for reading and writing as it is (created if missing), 0600.
pub fn open_private(path: &Path) -> io::Result<fs::File> {
    private_file(path, false)
}

fn private_file(path: &Path, truncate: bool) -> io::Result<fs::File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(Permissions::from_mode(0o600))?;
    Ok(f)
}

/// Writes `contents` to `path`, 0600.
pub fn write_private(path: &Path, contents: impl AsRef<[u8]>) -> io::Result<()> {
    create_private(path)?.write_all(contents.as_ref())
}
