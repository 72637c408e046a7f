//! The distinct hosts a short epoch wrote, up to [`HostMemo::CAP`]: with them a query checks
//! each written host against the sketch instead of reversing the heavy buckets, whose candidate
//! set explodes when a short epoch's threshold is a handful of peers (two_level at 1 ms epochs:
//! ~125 ms of reversal per epoch, truncated at the candidate cap, and phantom hosts that were
//! never seen). Past the cap the memo is dropped for the epoch and the reversal answers.
//!
//! The memo is a set: which hosts, and whether there were more than the cap, do not depend on
//! the order of updates, on aggregation or on how epochs were split and merged, so answers stay
//! the same with Agg-Evict and across workers.

use serde::{Deserialize, Serialize};

/// Open addressing over `u32` hosts; slot value 0 is empty, host 0 is kept in `zero`. Serialized
/// as the sorted set (or `null` past the cap): slot positions depend on insertion order.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "Option<Vec<u32>>", from = "Option<Vec<u32>>")]
pub(crate) struct HostMemo {
    slots: Vec<u32>,
    zero: bool,
    len: usize,
    overflowed: bool,
}

impl HostMemo {
    /// Most distinct hosts remembered per epoch.
    pub const CAP: usize = 4096;
    const SLOTS: usize = 2 * Self::CAP;

    pub fn new() -> HostMemo {
        HostMemo {
            slots: vec![0; Self::SLOTS],
            zero: false,
            len: 0,
            overflowed: false,
        }
    }

    pub const fn memory_bytes() -> usize {
        Self::SLOTS * 4
    }

    #[inline]
    pub fn insert(&mut self, host: u32) {
        if self.overflowed {
            return;
        }
        if host == 0 {
            if !self.zero {
                self.zero = true;
                self.len += 1;
                self.check_cap();
            }
            return;
        }
        let mut i = key::reduce(key::mix64(u64::from(host)), Self::SLOTS);
        loop {
            match self.slots[i] {
                0 => break,
                h if h == host => return,
                _ => i = (i + 1) % Self::SLOTS,
            }
        }
        if self.len == Self::CAP {
            self.overflowed = true;
            return;
        }
        self.slots[i] = host;
        self.len += 1;
    }

    fn check_cap(&mut self) {
        if self.len > Self::CAP {
            self.overflowed = true;
        }
    }

    /// The remembered hosts, ascending; `None` past the cap.
    pub fn hosts(&self) -> Option<Vec<u32>> {
        if self.overflowed {
            return None;
        }
        let mut v: Vec<u32> = self.slots.iter().copied().filter(|&h| h != 0).collect();
        if self.zero {
            v.push(0);
        }
        v.sort_unstable();
        Some(v)
    }

    /// Union with another epoch part's memo.
    pub fn merge(&mut self, o: &HostMemo) {
        match o.hosts() {
            None => self.overflowed = true,
            Some(hs) => hs.into_iter().for_each(|h| self.insert(h)),
        }
    }

    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.zero = false;
        self.len = 0;
        self.overflowed = false;
    }
}

impl From<HostMemo> for Option<Vec<u32>> {
    fn from(m: HostMemo) -> Self {
        m.hosts()
    }
}

impl From<Option<Vec<u32>>> for HostMemo {
    fn from(hosts: Option<Vec<u32>>) -> Self {
        let mut m = HostMemo::new();
        match hosts {
            Some(hs) => hs.into_iter().for_each(|h| m.insert(h)),
            None => m.overflowed = true,
        }
        m
    }
}

/// Equal as sets (slot positions depend on insertion order).
impl PartialEq for HostMemo {
    fn eq(&self, o: &HostMemo) -> bool {
        self.hosts() == o.hosts()
    }
}

impl Eq for HostMemo {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_up_to_the_cap_in_any_order() {
        let hosts: Vec<u32> = (0..HostMemo::CAP as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let (mut a, mut b) = (HostMemo::new(), HostMemo::new());
        for &h in &hosts {
            a.insert(h);
            a.insert(h);
        }
        for &h in hosts.iter().rev() {
            b.insert(h);
        }
        assert_eq!(a, b);
        let mut want = hosts.clone();
        want.sort_unstable();
        assert_eq!(a.hosts(), Some(want));
        // One more distinct host: past the cap, in either order.
        a.insert(7);
        assert!(hosts.contains(&0) && !hosts.contains(&7));
        assert_eq!(a.hosts(), None);
        let mut c = HostMemo::new();
        c.insert(7);
        c.merge(&b);
        assert_eq!(c.hosts(), None);
        assert_eq!(a, c);
        c.clear();
        assert_eq!(c, HostMemo::new());
        // Serialized as the set, whatever the order of insertion.
        let (mut p, mut q) = (HostMemo::new(), HostMemo::new());
        [5u32, 0, 9].iter().for_each(|&h| p.insert(h));
        [9u32, 5, 0, 5].iter().for_each(|&h| q.insert(h));
        let (sp, sq) = (
            serde_json::to_string(&p).unwrap(),
            serde_json::to_string(&q).unwrap(),
        );
        assert_eq!(sp, "[0,5,9]");
        assert_eq!(sp, sq);
        assert_eq!(serde_json::from_str::<HostMemo>(&sp).unwrap(), p);
        assert_eq!(serde_json::to_string(&a).unwrap(), "null");
        // Merge of two halves is the memo of the whole.
        let (mut x, mut y) = (HostMemo::new(), HostMemo::new());
        hosts[..100].iter().for_each(|&h| x.insert(h));
        hosts[50..200].iter().for_each(|&h| y.insert(h));
        x.merge(&y);
        let mut z = HostMemo::new();
        hosts[..200].iter().for_each(|&h| z.insert(h));
        assert_eq!(x, z);
    }
}
