//! The FlowRegulator (InstaMeasure section III-A, Algorithm 1): RCC words in front of the flow
//! table, so that only saturations reach it.
//!
//! - One layer (`rcc`, the RFlow+ baseline): an L1 saturation of noise class `c` emits
//!   `UNIT[c]` packets.
//! - Two layers (`instameasure`): an L1 saturation of class `c` is one packet of the L2 array of
//!   class `c`, at the same word index and with the same vector (no second hash); an L2
//!   saturation of class `d` emits `UNIT[c] x UNIT[d]` packets (lines 9-16).
//!
//! Layout: the L1 word and its three L2 words of one index are adjacent (`lanes` = 4 u32, 16
//! bytes, in one cache line), so the L2 access the paper counts as a second memory access hits
//! the line the L1 access brought in. The arrays are the paper's (each `words` long); only their
//! interleaving is ours.

use serde::{Deserialize, Serialize};

use crate::rcc::{self, Bits, Vector, CLASSES, UNIT};

/// What one packet did in the regulator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Its L1 vector kept it.
    Held,
    /// It saturated its L1 vector (of this noise class), and the L2 vector kept that.
    L1(usize),
    /// It saturated the last layer (its L1 vector of this noise class): this many packets go
    /// to the table.
    Emit(usize, f64),
}

/// One regulator: `words` indexes of `lanes` words (1: L1 only; 4: L1 and the three L2 arrays).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regulator {
    words: usize,
    lanes: usize,
    cells: Vec<u32>,
}

impl Regulator {
    /// `words` L1 words; `two_layers` adds the three L2 arrays.
    pub fn new(words: usize, two_layers: bool) -> Regulator {
        let lanes = Self::lanes(two_layers);
        Regulator {
            words,
            lanes,
            cells: vec![0; words * lanes],
        }
    }

    /// `Ok` when a loaded regulator has the shape `new(words, two_layers)` makes.
    pub fn check(&self, words: usize, two_layers: bool) -> Result<(), String> {
        let lanes = Self::lanes(two_layers);
        if self.words != words || self.lanes != lanes || self.cells.len() != words * lanes {
            return Err(format!(
                "regulator of {} words x {} lanes in {} cells, the configuration has {words} x \
                 {lanes}",
                self.words,
                self.lanes,
                self.cells.len()
            ));
        }
        Ok(())
    }

    pub fn lanes(two_layers: bool) -> usize {
        if two_layers {
            1 + CLASSES
        } else {
            1
        }
    }

    /// Bytes of counters of a regulator of `words` L1 words.
    pub fn bytes_for(words: usize, two_layers: bool) -> usize {
        words * Self::lanes(two_layers) * 4
    }

    pub fn memory_bytes(&self) -> usize {
        self.cells.len() * 4
    }

    pub fn words(&self) -> usize {
        self.words
    }

    pub fn two_layers(&self) -> bool {
        self.lanes > 1
    }

    #[inline(always)]
    fn base(&self, h: u64) -> usize {
        key::reduce(h, self.words) * self.lanes
    }

    /// Prefetch the words of hash `h` (a batch hashes ahead, then offers).
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        key::prefetch_at(&self.cells, self.base(h));
    }

    /// Offer one packet of the flow with hash `h`: `Some(packets)` when it saturates the last
    /// layer (what to add to the flow table), `None` while the regulator keeps it.
    #[inline(always)]
    pub fn offer(&mut self, h: u64, bits: &mut Bits) -> Option<f64> {
        match self.step(h, bits) {
            Step::Emit(_, p) => Some(p),
            Step::Held | Step::L1(_) => None,
        }
    }

    /// [`Regulator::offer`], telling also an L1 saturation that the last layer kept (where
    /// what the regulator holds of the flow moved by a unit: instant detection looks then).
    #[inline(always)]
    pub fn step(&mut self, h: u64, bits: &mut Bits) -> Step {
        let i = self.base(h);
        let v = Vector::of(h);
        let Some(c1) = rcc::encode(&mut self.cells[i], v, bits) else {
            return Step::Held;
        };
        if self.lanes == 1 {
            return Step::Emit(c1, UNIT[c1]);
        }
        match rcc::encode(&mut self.cells[i + 1 + c1], v, bits) {
            Some(c2) => Step::Emit(c1, UNIT[c1] * UNIT[c2]),
            None => Step::L1(c1),
        }
    }

    /// Packets of the flow with hash `h` still held: the L1 vector's estimate plus each L2
    /// vector's estimate times its class's unit, at least 0.
    pub fn held(&self, h: u64) -> f64 {
        let i = self.base(h);
        let v = Vector::of(h);
        let mut n = rcc::held_signed(self.cells[i], v);
        if self.lanes > 1 {
            for (c, unit) in UNIT.iter().enumerate() {
                n += unit * rcc::held_signed(self.cells[i + 1 + c], v);
            }
        }
        n.max(0.0)
    }

    /// Packets the L1 vector of hash `h` holds, at least 0 (what instant detection adds to a
    /// table flow's count of L1 saturations).
    pub fn held_l1(&self, h: u64) -> f64 {
        rcc::held_signed(self.cells[self.base(h)], Vector::of(h)).max(0.0)
    }

    /// Fraction of L1 bits set (how crowded the words are).
    pub fn l1_load(&self) -> f64 {
        let ones: u64 = self
            .cells
            .iter()
            .step_by(self.lanes)
            .map(|w| u64::from(w.count_ones()))
            .sum();
        ones as f64 / (self.words as f64 * 32.0)
    }

    pub fn reset(&mut self) {
        self.cells.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lone flow's emissions plus what is held add up to its packets, one layer and two
    /// (the unbiasedness of the units, through the regulator's layout).
    #[test]
    fn a_lone_flow_is_counted_by_both_layers() {
        for two in [false, true] {
            let mut r = Regulator::new(64, two);
            let mut bits = Bits::new(5);
            let h = 0x1234_5678_9abc_def0;
            let n = 100_000u64;
            let (mut emitted, mut emits) = (0.0, 0u64);
            for _ in 0..n {
                if let Some(p) = r.offer(h, &mut bits) {
                    emitted += p;
                    emits += 1;
                }
            }
            let est = emitted + r.held(h);
            assert!(
                (est / n as f64 - 1.0).abs() < 0.02,
                "two {two}: {est} for {n}"
            );
            // One layer emits every ~9.7 packets, two every ~95.
            let per = n as f64 / emits as f64;
            let want = if two { UNIT[0] * UNIT[0] } else { UNIT[0] };
            assert!((per / want - 1.0).abs() < 0.05, "two {two}: {per} per emit");
        }
    }
}
