//! Writing a file whole or not at all (`gen`'s output; the Python package's): the new content
//! goes to a temporary file beside the target and is renamed over it at the end, after a check
//! that the file system has room for it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Why a file of up to `need` bytes cannot go where `free` bytes are available, if it cannot.
pub fn space_error(need: u64, free: u64) -> Option<String> {
    use measure::report::human_bytes;
    (need > free).then(|| {
        format!(
            "the trace takes up to {} ({need} bytes) and the file system has {} free",
            human_bytes(need),
            human_bytes(free)
        )
    })
}

/// Bytes available to this user on the file system holding `dir` (statvfs), `None` where that
/// cannot be told.
pub fn free_space(dir: &Path) -> Option<u64> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Write `path` through `write`, replacing a regular file only once the new content is complete
/// (temporary file beside it, then rename; a symlink's target is what gets replaced), after
/// checking that the file system has `need` bytes free (the old file's space is only released at
/// the rename). A special file (device, FIFO) is opened and written in place.
pub fn write_replacing<T>(
    path: &Path,
    need: u64,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<T>,
) -> Result<T> {
    let shown = path.display();
    let existing = match std::fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot write {shown}")),
    };
    if let Some(m) = existing.as_ref().filter(|m| !m.is_file()) {
        if m.is_dir() {
            bail!("cannot write {shown}: is a directory");
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {shown}"))?;
        return write(&mut f).with_context(|| format!("writing {shown}"));
    }
    // Replace what a symlink points to, not the link.
    let target = match &existing {
        Some(_) => std::fs::canonicalize(path).with_context(|| format!("cannot write {shown}"))?,
        None => path.to_path_buf(),
    };
    let name = target
        .file_name()
        .with_context(|| format!("cannot write {shown}: not a file name"))?;
    if let Some(e) = target
        .parent()
        .and_then(free_space)
        .and_then(|free| space_error(need, free))
    {
        bail!("cannot write {shown}: {e}");
    }
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let mut tmp = TempFile {
        path: target.with_file_name(tmp_name),
        keep: false,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp.path)
        .with_context(|| format!("cannot create {}", tmp.path.display()))?;
    let n = write(&mut f).with_context(|| format!("writing {shown}"))?;
    f.sync_all().with_context(|| format!("writing {shown}"))?;
    if let Some(m) = &existing {
        // The new file keeps the old one's permissions.
        std::fs::set_permissions(&tmp.path, m.permissions())
            .with_context(|| format!("writing {shown}"))?;
    }
    std::fs::rename(&tmp.path, &target).with_context(|| format!("cannot replace {shown}"))?;
    tmp.keep = true;
    Ok(n)
}

/// A temporary file removed when dropped unless kept (on every early return of
/// [`write_replacing`]).
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_checked_against_the_largest_output() {
        assert_eq!(space_error(10, 10), None);
        let e = space_error(3 << 40, 5 << 30).unwrap();
        assert!(e.contains("3.0 TiB") && e.contains("5.0 GiB free"), "{e}");
        // The current directory's file system has some free space, and not 16 EiB of it.
        let free = free_space(Path::new("")).expect("statvfs of .");
        assert!(space_error(u64::MAX, free).is_some());
    }
}
