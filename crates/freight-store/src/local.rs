//! Local writes without object_store's buffering: the parts are written straight from the
//! caller's memory into a staging file beside the destination (`<file>#<n>`, object_store's own
//! convention, so its listings hide it), fsynced, then renamed into place (or hard-linked, to
//! refuse an existing value), and the folder is fsynced. Measured on 256 MiB: object_store's
//! multipart path copied every part and ran at a fifth of `cp`'s speed.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

pub enum PutError {
    /// `if_absent` and a value is there.
    Exists,
    Io(std::io::Error),
}

impl From<std::io::Error> for PutError {
    fn from(err: std::io::Error) -> Self {
        PutError::Io(err)
    }
}

/// Creates `<dest>#<n>` for the first free n (creating the folder when missing).
fn staging_file(dest: &Path) -> std::io::Result<(File, PathBuf)> {
    let mut created_dirs = false;
    for n in 1u32.. {
        let mut name = dest.as_os_str().to_owned();
        name.push(format!("#{n}"));
        let staging = PathBuf::from(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)
        {
            Ok(file) => return Ok((file, staging)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) if e.kind() == ErrorKind::NotFound && !created_dirs => {
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                created_dirs = true;
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("u32 staging numbers run out")
}

fn sync_dir(dir: Option<&Path>) -> std::io::Result<()> {
    match dir {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// Bytes written between two progress reports.
const REPORT_EVERY: usize = 8 << 20;

/// Writes the concatenation of `parts` to `dest`, atomically and durably, calling `report`
/// with the bytes written as it goes.
pub fn put(
    dest: &Path,
    parts: &[&[u8]],
    if_absent: bool,
    report: &dyn Fn(usize),
) -> Result<(), PutError> {
    if if_absent && dest.exists() {
        return Err(PutError::Exists);
    }
    let (mut file, staging) = staging_file(dest)?;
    let written = (|| -> Result<(), PutError> {
        for part in parts {
            for chunk in part.chunks(REPORT_EVERY) {
                file.write_all(chunk)?;
                report(chunk.len());
            }
        }
        file.sync_all()?;
        drop(file);
        if if_absent {
            // A hard link never replaces: of several create-only writers, one wins.
            match std::fs::hard_link(&staging, dest) {
                Ok(()) => std::fs::remove_file(&staging)?,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => return Err(PutError::Exists),
                Err(e) => return Err(e.into()),
            }
        } else {
            std::fs::rename(&staging, dest)?;
        }
        sync_dir(dest.parent())?;
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    written
}
