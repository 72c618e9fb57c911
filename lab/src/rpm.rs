//! The RPM built by scripts/build-rpm: found, and unpacked into a directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::*;

/// The newest package under target/rpm/DIR (RPMS, SRPMS) whose file name is `name-` and a
/// version (so `hamaster` is not `hamaster-debuginfo`) ending in `suffix`; None before
/// `make rpm`.
pub fn built_rpm(dir: &str, name: &str, suffix: &str) -> Option<PathBuf> {
    let root = Path::new(repo()).join("target/rpm").join(dir);
    let mut found: Vec<PathBuf> = files_under(&root)
        .into_iter()
        .filter(|p| {
            let file = p.file_name().unwrap_or_default().to_string_lossy();
            file.ends_with(suffix)
                && file
                    .strip_prefix(&format!("{name}-"))
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    found.sort();
    found.pop()
}

/// Unpacks `rpm` into `dir`, made anew (rpm2cpio | cpio).
pub fn unpack_rpm(rpm: &Path, dir: &Path) {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("rpm2cpio {} | cpio -idm --quiet", rpm.display()))
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "unpacking {}", rpm.display());
}
