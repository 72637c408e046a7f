//! An agent's spool: the directory its run writes each epoch's snapshot into
//! (`snapshot::write`: a temporary file renamed, so a listed file is whole), and from which the
//! publisher removes a file only once JetStream has acknowledged it. A restarted agent finds
//! what it had not sent and sends that first.
//!
//! Bounded in files and bytes: when the broker stays away longer than the spool holds, the
//! OLDEST snapshots are dropped (the controller has reported their epochs without this host by
//! its deadline already, so a fresh epoch is worth more), counted and named in a warning.

use std::path::{Path, PathBuf};

use crate::Error;

/// One spooled snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    pub host: String,
    pub epoch: u64,
    pub bytes: u64,
}

pub struct Spool {
    dir: PathBuf,
    max_files: usize,
    max_bytes: u64,
    /// Snapshots dropped because the spool was full, and their epochs (the first 64).
    pub dropped: u64,
    pub dropped_epochs: Vec<u64>,
}

impl Spool {
    /// The spool in `dir` (created if missing), holding at most `max_files` snapshots and
    /// `max_bytes` bytes (both at least 1).
    pub fn open(dir: &Path, max_files: usize, max_bytes: u64) -> Result<Spool, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Spool {
            dir: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(Spool {
            dir: dir.to_path_buf(),
            max_files: max_files.max(1),
            max_bytes: max_bytes.max(1),
            dropped: 0,
            dropped_epochs: vec![],
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The snapshots waiting, oldest epoch first, after dropping the oldest beyond the bounds.
    /// Files that are not snapshots of the `snapshot::file_name` form are left alone.
    pub fn pending(&mut self) -> Result<Vec<Entry>, Error> {
        let err = |e: std::io::Error| Error::Spool {
            dir: self.dir.display().to_string(),
            reason: e.to_string(),
        };
        let mut list = vec![];
        for d in std::fs::read_dir(&self.dir).map_err(err)? {
            let d = d.map_err(err)?;
            let name = d.file_name();
            let Some((host, epoch)) = name.to_str().and_then(parse_name) else {
                continue;
            };
            // A file removed between the listing and here is simply gone.
            let Ok(meta) = d.metadata() else { continue };
            list.push(Entry {
                path: d.path(),
                host,
                epoch,
                bytes: meta.len(),
            });
        }
        list.sort_by(|a, b| (a.epoch, &a.host).cmp(&(b.epoch, &b.host)));
        let mut bytes: u64 = list.iter().map(|e| e.bytes).sum();
        let mut over = 0;
        while list.len() - over > self.max_files || (bytes > self.max_bytes && list.len() > over) {
            let old = &list[over];
            let _ = std::fs::remove_file(&old.path);
            bytes -= old.bytes;
            self.dropped += 1;
            if self.dropped_epochs.len() < 64 {
                self.dropped_epochs.push(old.epoch);
            }
            tracing::warn!(
                "spool full ({} files, {} bytes at most): dropped {}",
                self.max_files,
                self.max_bytes,
                old.path.display()
            );
            over += 1;
        }
        list.drain(..over);
        Ok(list)
    }
}

/// `HOST-epochNNNNNN.nss` (`snapshot::file_name`) as (host, epoch); `None` for anything else
/// (temporary files start with '.').
pub fn parse_name(name: &str) -> Option<(String, u64)> {
    let stem = name.strip_suffix(&format!(".{}", snapshot::EXT))?;
    let (host, epoch) = stem.rsplit_once("-epoch")?;
    snapshot::check_host(host).ok()?;
    let epoch = epoch.parse().ok()?;
    (snapshot::file_name(host, epoch) == name).then(|| (host.to_string(), epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_ignored() {
        let n = snapshot::file_name("h-1.a", 1234567);
        assert_eq!(parse_name(&n), Some(("h-1.a".into(), 1234567)));
        assert_eq!(parse_name(".h-epoch000001.nss.tmp"), None);
        assert_eq!(parse_name("h-epoch1.nss"), None);
        assert_eq!(parse_name("notes.txt"), None);
    }

    #[test]
    fn the_oldest_are_dropped_past_the_bounds() {
        let dir = std::env::temp_dir().join(format!("netwide-spool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = Spool::open(&dir, 3, 1 << 20).unwrap();
        for e in [5u64, 1, 3, 2, 4] {
            std::fs::write(dir.join(snapshot::file_name("a", e)), [0u8; 10]).unwrap();
        }
        std::fs::write(dir.join("other"), b"x").unwrap();
        let left: Vec<u64> = s.pending().unwrap().iter().map(|e| e.epoch).collect();
        assert_eq!(left, vec![3, 4, 5]);
        assert_eq!((s.dropped, s.dropped_epochs.clone()), (2, vec![1, 2]));
        // Bytes: 25 bytes hold two files of 10.
        let mut s = Spool::open(&dir, 100, 25).unwrap();
        let left: Vec<u64> = s.pending().unwrap().iter().map(|e| e.epoch).collect();
        assert_eq!(left, vec![4, 5]);
        assert_eq!(s.dropped, 1);
        assert!(dir.join("other").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
