//! The exact answer of every task, computed from one epoch's per-flow counts (ALGORITHMS.md
//! section 1). This is the runner's ground truth, and nothing else: no algorithm calls it, and it
//! shares no code with the algorithms' own answers (`algo::size_histogram`, `algo::entropy_of`,
//! the exact tables), so a bug in one is not scored as perfect by the other.
//!
//! Written from the definitions, not from the algorithms' code: the histogram counts sizes in an
//! ordered map, the entropy is the definition −Σ p·log2 p with p = s/N (the algorithms use
//! log2 N − (1/N)·Σ s·log2 s), spreaders count distinct peers per host over the pair keys, and
//! the change of a flow is measured against the previous epoch or against an EWMA prediction,
//! whichever question the algorithm answers ([`Ewma`]).

use std::collections::BTreeMap;

use key::{FlowKey, KeyMap, KeySet};

use crate::{EpochTruth, Weight};

/// `n[s]` = the number of flows of size `s` (index 0 unused, always 0): the flow-size
/// distribution. Sizes of 0 are not flows.
pub fn histogram(sizes: impl IntoIterator<Item = u64>) -> Vec<f64> {
    let mut by_size: BTreeMap<u64, u64> = BTreeMap::new();
    for s in sizes.into_iter().filter(|&s| s > 0) {
        *by_size.entry(s).or_insert(0) += 1;
    }
    let largest = by_size.keys().next_back().copied().unwrap_or(0);
    let mut n = vec![0.0; largest as usize + 1];
    for (s, flows) in by_size {
        n[s as usize] = flows as f64;
    }
    n
}

/// Traffic entropy over flows in bits, H = −Σ_x p_x·log2 p_x with p_x = s_x / N (0 for no
/// traffic). Zero sizes contribute nothing.
///
/// The same value whatever order the flows come in: each term (in [-0.531, 0]) is summed in
/// fixed point, as an integer count of 2^-90 (its f64 times a power of two, exact, then its
/// fraction dropped: at most 2^-90 a flow), and integer addition does not depend on the order.
/// A float sum did, in its last bit: the epoch's flows come in the order of a hash table whose
/// capacity, recycled from epoch to epoch, depended on timing, so a report's exact entropy
/// differed between two runs of the same command.
pub fn entropy(sizes: impl IntoIterator<Item = u64>) -> f64 {
    const SCALE: f64 = (1u128 << 90) as f64;
    let sizes: Vec<u64> = sizes.into_iter().filter(|&s| s > 0).collect();
    let total = sizes.iter().map(|&s| u128::from(s)).sum::<u128>() as f64;
    if total == 0.0 {
        return 0.0;
    }
    let sum: i128 = sizes
        .iter()
        .map(|&s| {
            let p = s as f64 / total;
            // At least -0.531 * 2^90 > -2^90: 2^37 flows of them still fit an i128.
            (p * p.log2() * SCALE) as i128
        })
        .sum();
    -(sum as f64 / SCALE)
}

/// Which endpoint of a pair key is the host whose distinct peers are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// Superspreaders: sources, counting distinct destinations.
    Src,
    /// DDoS victims: destinations, counting distinct sources.
    Dst,
}

/// Distinct peers per host in one epoch.
#[derive(Clone, Debug, Default)]
pub struct Spread {
    /// Host -> number of distinct peers.
    pub peers: KeyMap<u64>,
    /// Distinct addresses on the peer side (the base of a fractional threshold).
    pub peer_addresses: usize,
}

impl Spread {
    /// The hosts with more than `t` distinct peers (ALGORITHMS.md 1: "> T"), with their counts.
    pub fn above(&self, t: u64) -> KeyMap<u64> {
        self.peers
            .iter()
            .filter(|&(_, &c)| c > t)
            .map(|(h, &c)| (*h, c))
            .collect()
    }
}

/// Per-flow change of the current epoch against a previous one: `|s_t − s_(t−1)|` over the
/// union of both epochs' flows, a flow absent from an epoch having size 0.
pub fn change(cur: &EpochTruth, prev: &EpochTruth, w: Weight) -> KeyMap<f64> {
    let mut out: KeyMap<f64> = KeyMap::default();
    let keys: KeySet = cur.flows.keys().chain(prev.flows.keys()).copied().collect();
    for k in keys {
        let now = cur.flows.get(&k).map_or(0, |c| c.get(w));
        let before = prev.flows.get(&k).map_or(0, |c| c.get(w));
        out.insert(k, now.abs_diff(before) as f64);
    }
    out
}

/// The exact EWMA model of a change detector (ALGORITHMS.md 11, Re-evaluating "Change
/// detection"): after the first epoch the prediction of a flow is its size in that epoch; after
/// every later epoch `P ← α·V + (1 − α)·P`; a flow never seen has prediction 0. The change of a
/// flow in an epoch is `|V − P|` with `V` its size in that epoch and `P` the prediction made
/// before it. Nothing is forgotten (a detector that prunes small predictions differs from this
/// by less than its pruning bound).
#[derive(Clone, Debug)]
pub struct Ewma {
    alpha: f64,
    /// Epochs folded in.
    epochs: u64,
    predicted: KeyMap<f64>,
}

impl Ewma {
    pub fn new(alpha: f64) -> Ewma {
        Ewma {
            alpha,
            epochs: 0,
            predicted: KeyMap::default(),
        }
    }

    /// Epochs folded into the predictions so far.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// `|V − P|` for every flow of `cur` or with a prediction; `None` before the first epoch
    /// has been folded in (there is no prediction yet).
    pub fn change(&self, cur: &EpochTruth, w: Weight) -> Option<KeyMap<f64>> {
        if self.epochs == 0 {
            return None;
        }
        let mut out: KeyMap<f64> = KeyMap::default();
        for (k, p) in &self.predicted {
            out.insert(*k, *p);
        }
        for (k, c) in &cur.flows {
            let p = self.predicted.get(k).copied().unwrap_or(0.0);
            out.insert(*k, (c.get(w) as f64 - p).abs());
        }
        Some(out)
    }

    /// Fold the epoch `cur` into the predictions (the epoch is over).
    pub fn fold(&mut self, cur: &EpochTruth, w: Weight) {
        let size = |k: &FlowKey| cur.flows.get(k).map_or(0.0, |c| c.get(w) as f64);
        if self.epochs == 0 {
            self.predicted = cur
                .flows
                .iter()
                .map(|(k, c)| (*k, c.get(w) as f64))
                .collect();
        } else {
            let a = self.alpha;
            for (k, p) in self.predicted.iter_mut() {
                *p = a * size(k) + (1.0 - a) * *p;
            }
            for (k, c) in &cur.flows {
                self.predicted.entry(*k).or_insert(a * c.get(w) as f64);
            }
        }
        self.epochs += 1;
    }
}

impl EpochTruth {
    /// The flow-size distribution of the epoch in the weight's unit ([`histogram`]).
    pub fn size_histogram(&self, w: Weight) -> Vec<f64> {
        histogram(self.sizes(w).map(|(_, s)| s))
    }

    /// The traffic entropy of the epoch in the weight's unit ([`entropy`]).
    pub fn entropy(&self, w: Weight) -> f64 {
        entropy(self.sizes(w).map(|(_, s)| s))
    }

    /// Distinct peers per host, from the epoch's pair keys (or wider keys holding both
    /// addresses; keys without both are ignored).
    pub fn spread(&self, host: Host) -> Spread {
        let mut pairs: BTreeMap<FlowKey, KeySet> = BTreeMap::new();
        let mut peer_side = KeySet::default();
        for k in self.flows.keys() {
            let (Some(src), Some(dst)) = (k.src_part(), k.dst_part()) else {
                continue;
            };
            let (h, p) = match host {
                Host::Src => (src, dst),
                Host::Dst => (dst, src),
            };
            pairs.entry(h).or_default().insert(p);
            peer_side.insert(p);
        }
        Spread {
            peers: pairs
                .into_iter()
                .map(|(h, p)| (h, p.len() as u64))
                .collect(),
            peer_addresses: peer_side.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(v: u32) -> FlowKey {
        FlowKey::from_u32(v)
    }

    fn pair(s: u32, d: u32) -> FlowKey {
        FlowKey::from_u32_pair(s, d)
    }

    /// An epoch with `flows[i] = (key, packets)`, every packet `len` bytes.
    fn epoch(flows: &[(FlowKey, u64)], len: u32) -> EpochTruth {
        let mut e = EpochTruth::new(0);
        for &(key, n) in flows {
            for _ in 0..n {
                e.add(0, key, len);
            }
        }
        e.settle();
        e
    }

    #[test]
    fn histogram_by_hand() {
        assert_eq!(histogram([1, 1, 3, 0, 5, 1]), vec![0., 3., 0., 1., 0., 1.]);
        assert_eq!(histogram([]), vec![0.0]);
        assert_eq!(histogram([0, 0]), vec![0.0]);
        // In bytes: one bin per byte count.
        let e = epoch(&[(k(1), 2), (k(2), 1)], 10);
        assert_eq!(e.size_histogram(Weight::Packets), vec![0., 1., 1.]);
        let b = e.size_histogram(Weight::Bytes);
        assert_eq!((b.len(), b[10], b[20]), (21, 1.0, 1.0));
    }

    #[test]
    fn entropy_by_hand() {
        // p = (1/2, 1/4, 1/4): H = 1/2 + 2 * 1/4 * 2 = 1.5 bits.
        assert!((entropy([4, 2, 2]) - 1.5).abs() < 1e-12);
        assert!((entropy([3, 3, 3, 3]) - 2.0).abs() < 1e-12);
        assert_eq!(entropy([9]), 0.0);
        assert_eq!(entropy([]), 0.0);
        assert_eq!(entropy([0, 0]), 0.0);
        // Any order of the same flows gives the same bits (a float sum of these ten terms
        // differs in its last bit between the two orders).
        let sizes = [1u64, 7, 1_000_003, 3, 2, 999_999, 5, 11, 13, 4_096];
        let mut back = sizes;
        back.reverse();
        assert_eq!(entropy(sizes).to_bits(), entropy(back).to_bits());
        // p = (1/3, 2/3): log2 3 - 2/3.
        let h = 3f64.log2() - 2.0 / 3.0;
        assert!((entropy([1, 2, 0]) - h).abs() < 1e-12);
        // Weight-aware: 2 packets of 10 bytes vs 1 of 10 bytes is (2/3, 1/3) either way, but
        // 1 packet of 30 bytes against 1 of 10 is (3/4, 1/4) in bytes and (1/2, 1/2) in packets.
        let mut e = epoch(&[(k(1), 1)], 30);
        e.add(0, k(2), 10);
        e.settle();
        assert!((e.entropy(Weight::Packets) - 1.0).abs() < 1e-12);
        let h = -(0.75f64 * 0.75f64.log2() + 0.25 * 0.25f64.log2());
        assert!((e.entropy(Weight::Bytes) - h).abs() < 1e-12);
    }

    #[test]
    fn spread_counts_distinct_peers_per_host() {
        // Source 1 talks to 2, 3, 4 (3 peers, one of them twice); source 5 to 2 (1 peer).
        let e = epoch(
            &[
                (pair(1, 2), 4),
                (pair(1, 3), 1),
                (pair(1, 4), 1),
                (pair(5, 2), 1),
                (k(77), 3), // no pair: ignored
            ],
            1,
        );
        let s = e.spread(Host::Src);
        assert_eq!(s.peers.len(), 2);
        assert_eq!(s.peers[&k(1)], 3);
        assert_eq!(s.peers[&k(5)], 1);
        assert_eq!(s.peer_addresses, 3);
        // "More than t": a host with exactly t peers is not a spreader.
        assert_eq!(s.above(3).len(), 0);
        assert_eq!(s.above(2).keys().copied().collect::<Vec<_>>(), vec![k(1)]);
        assert_eq!(s.above(0).len(), 2);
        let d = e.spread(Host::Dst);
        assert_eq!(d.peers[&k(2)], 2);
        assert_eq!(d.peers[&k(3)], 1);
        assert_eq!(d.peer_addresses, 2);
        assert_eq!(d.above(1).keys().copied().collect::<Vec<_>>(), vec![k(2)]);
    }

    #[test]
    fn change_against_the_previous_epoch() {
        let prev = epoch(&[(k(1), 10), (k(2), 5)], 100);
        let cur = epoch(&[(k(1), 4), (k(3), 7)], 100);
        let c = change(&cur, &prev, Weight::Packets);
        assert_eq!(c.len(), 3);
        assert_eq!((c[&k(1)], c[&k(2)], c[&k(3)]), (6.0, 5.0, 7.0));
        let c = change(&cur, &prev, Weight::Bytes);
        assert_eq!(c[&k(1)], 600.0);
    }

    #[test]
    fn ewma_change_by_hand() {
        let mut m = Ewma::new(0.5);
        let e0 = epoch(&[(k(1), 100), (k(2), 8)], 1);
        assert!(m.change(&e0, Weight::Packets).is_none());
        m.fold(&e0, Weight::Packets);
        // P(1) = 100, P(2) = 8; flow 3 is new (P = 0).
        let e1 = epoch(&[(k(1), 300), (k(3), 5)], 1);
        let c = m.change(&e1, Weight::Packets).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!((c[&k(1)], c[&k(2)], c[&k(3)]), (200.0, 8.0, 5.0));
        m.fold(&e1, Weight::Packets);
        // P(1) = 0.5·300 + 0.5·100 = 200; P(2) = 0.5·0 + 0.5·8 = 4; P(3) = 0.5·5 = 2.5.
        let e2 = epoch(&[(k(1), 200), (k(2), 4)], 1);
        let c = m.change(&e2, Weight::Packets).unwrap();
        assert_eq!((c[&k(1)], c[&k(2)], c[&k(3)]), (0.0, 0.0, 2.5));
        // Against the previous epoch instead, flow 1 changed by 100: a different question.
        assert_eq!(change(&e2, &e1, Weight::Packets)[&k(1)], 100.0);
        m.fold(&e2, Weight::Packets);
        assert_eq!(m.epochs(), 3);
        // alpha 0.25 weighs the newest epoch by a quarter: P(1) = 0.25·300 + 0.75·100 = 150,
        // P(2) = 0.75·8 = 6, P(3) = 0.25·5 = 1.25 (an empty epoch shows the predictions).
        let mut q = Ewma::new(0.25);
        q.fold(&e0, Weight::Packets);
        q.fold(&e1, Weight::Packets);
        let c = q.change(&EpochTruth::new(0), Weight::Packets).unwrap();
        assert_eq!((c[&k(1)], c[&k(2)], c[&k(3)]), (150.0, 6.0, 1.25));
        // alpha = 1 is the previous epoch's size.
        let mut one = Ewma::new(1.0);
        one.fold(&e0, Weight::Packets);
        one.fold(&e1, Weight::Packets);
        let c = one.change(&e2, Weight::Packets).unwrap();
        let d = change(&e2, &e1, Weight::Packets);
        assert_eq!(c, d);
    }
}
