//! The array index of [`crate::Index::Modulo`]: `flow_id % k` without a division.

/// Lemire, Kaser, Kurz, "Faster remainder by direct computation" (2019): `a % d` for u32 `a`
/// and a run-time constant `d` with two multiplications and no division.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastMod {
    m: u64,
    d: u64,
}

impl FastMod {
    pub(crate) fn new(d: u32) -> FastMod {
        // For d = 1 this wraps to m = 0 and the remainder is 0, as it should be.
        FastMod {
            m: (u64::MAX / u64::from(d.max(1))).wrapping_add(1),
            d: u64::from(d.max(1)),
        }
    }

    #[inline(always)]
    pub(crate) fn rem(self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}
