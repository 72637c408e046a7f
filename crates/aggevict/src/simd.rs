//! Lookup kernels: compare one probe key with the 16 keys of one array (one cache line) and
//! return the 16-bit mask of *occupied* slots holding it (Agg-Evict section 3.4, Algorithm 1).
//!
//! memchr style: a portable scalar kernel is always compiled; the x86 kernels are used only
//! after `is_x86_feature_detected!` confirmed their feature (detected once, cached), and the
//! aggregator's batch loop is compiled once per kernel inside a `#[target_feature]` entry
//! point, so the `#[inline(always)]` kernels below inline into it with no call per packet.
//!
//! Each kernel also finds the run starts of a 32-packet chunk (`Kernel::run_starts`): the
//! bit mask of packets whose key differs from the previous packet's, two 16-wide compares of
//! the chunk against itself shifted by one. LLVM does not turn the portable loop into a
//! compare-to-mask (it builds the mask with vector shifts and an OR reduction); replacing that,
//! together with a one-test unit-weight check, saved ~0.2 ns a packet on the bursty trace.
//!
//! Occupancy is explicit: a slot matches only if its bit is set in `occ`, so key 0 (and
//! fingerprint 0) is a key like any other and never matches an empty slot (the artifact lets
//! key 0 match empty slots; ALGORITHMS.md 0). Keys are unique among occupied slots by
//! construction (a key is inserted only after a miss), so every kernel returns at most one bit.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::Simd;

/// Slots per array (l = 16: sixteen 4-byte keys fill one 64-byte cache line, section 3.4).
pub const SLOTS: usize = 16;

/// The 16 u32 keys (or values, or LRU stamps) of one array, aligned to a cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Line(pub [u32; SLOTS]);

/// One lookup kernel.
pub(crate) trait Kernel {
    /// Whether `find` is the branchy scalar loop: its own early exit already branches per slot,
    /// so the aggregator keeps the branchy GRR lookup with it (measured faster on bursty
    /// traffic, equal on shuffled).
    const SCALAR: bool = false;

    /// Mask of the slots `s` with `occ` bit `s` set and `line.0[s] == key`.
    ///
    /// # Safety
    /// The CPU must support the kernel's target feature (checked by [`available`]).
    unsafe fn find(line: &Line, key: u32, occ: u16) -> u32;

    /// Bit `j` set where `ks[j] != ks[j - 1]`, and bit 0: the packets of a chunk that start
    /// a run of equal keys. [`run_starts_scalar`] is the twin.
    ///
    /// # Safety
    /// The CPU must support the kernel's target feature (checked by [`available`]).
    #[inline(always)]
    unsafe fn run_starts(ks: &[u32; CHUNK]) -> u32 {
        run_starts_scalar(ks)
    }
}

/// Packets per chunk of the aggregator's loop (and per run-start mask).
pub const CHUNK: usize = 32;

/// The scalar twin of every kernel's `Kernel::run_starts` (safe; the scalar kernel's own).
#[inline(always)]
pub fn run_starts_scalar(ks: &[u32; CHUNK]) -> u32 {
    let mut m = 1u32;
    for j in 1..CHUNK {
        m |= u32::from(ks[j] != ks[j - 1]) << j;
    }
    m
}

/// Run kernel `simd`'s run-start mask (`None` if the CPU lacks it). For the equivalence tests.
pub fn run_starts_with(simd: Simd, ks: &[u32; CHUNK]) -> Option<u32> {
    let simd = resolve(simd)?;
    // SAFETY: `available(simd)` confirmed the CPU feature each kernel needs.
    Some(unsafe {
        match simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => x86::run_starts_avx512_entry(ks),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => x86::run_starts_avx2_entry(ks),
            #[cfg(target_arch = "x86_64")]
            Simd::Sse2 => x86::run_starts_sse2_entry(ks),
            _ => run_starts_scalar(ks),
        }
    })
}

/// Linear search with early exit: the paper's non-SIMD baseline (Figure 8b/c). Written as a
/// branchy loop on purpose, so the compiler does not turn it into SIMD behind our back.
pub(crate) struct Scalar;

impl Kernel for Scalar {
    const SCALAR: bool = true;
    #[inline(always)]
    unsafe fn find(line: &Line, key: u32, occ: u16) -> u32 {
        find_scalar(line, key, occ)
    }
}

/// The scalar twin of every SIMD kernel (safe; used by the equivalence tests).
#[inline(always)]
pub fn find_scalar(line: &Line, key: u32, occ: u16) -> u32 {
    for (s, &k) in line.0.iter().enumerate() {
        if k == key && occ & (1 << s) != 0 {
            return 1 << s;
        }
    }
    0
}

/// Run the kernel `simd` (which must be available; `Auto` means the detected best).
/// `None` if the CPU lacks it. For tests and benches comparing kernels.
pub fn find_with(simd: Simd, line: &Line, key: u32, occ: u16) -> Option<u32> {
    let simd = resolve(simd)?;
    // SAFETY: `available(simd)` confirmed the CPU feature each kernel needs.
    Some(unsafe {
        match simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => x86::find_avx512_entry(line, key, occ),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => x86::find_avx2_entry(line, key, occ),
            #[cfg(target_arch = "x86_64")]
            Simd::Sse2 => x86::find_sse2_entry(line, key, occ),
            _ => find_scalar(line, key, occ),
        }
    })
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{Kernel, Line, CHUNK};
    use std::arch::x86_64::*;

    /// Both halves of a run-start mask: `lo` bit `j` compares packets `j + 1` and `j`, `hi` bit
    /// `j` packets `j + 16` and `j + 15` (bit 16 of the result is in both, consistently).
    #[inline(always)]
    fn starts_from_neq(lo: u32, hi: u32) -> u32 {
        1 | (lo & 0xFFFF) << 1 | (hi & 0xFFFF) << 16
    }

    /// SSE2: mask of the 16 equal u32 lanes of `a` and `b` (16 u32 each), as in `Sse2::find`.
    ///
    /// # Safety
    /// `a` and `b` are valid for 16 u32 reads; SSE2 is present.
    #[inline(always)]
    unsafe fn eq16_sse2(a: *const u32, b: *const u32) -> u32 {
        let (a, b) = (a.cast::<__m128i>(), b.cast::<__m128i>());
        // SAFETY: the caller guarantees 64 readable bytes at each (unaligned loads) and SSE2.
        unsafe {
            let e0 = _mm_cmpeq_epi32(_mm_loadu_si128(a), _mm_loadu_si128(b));
            let e1 = _mm_cmpeq_epi32(_mm_loadu_si128(a.add(1)), _mm_loadu_si128(b.add(1)));
            let e2 = _mm_cmpeq_epi32(_mm_loadu_si128(a.add(2)), _mm_loadu_si128(b.add(2)));
            let e3 = _mm_cmpeq_epi32(_mm_loadu_si128(a.add(3)), _mm_loadu_si128(b.add(3)));
            let all = _mm_packs_epi16(_mm_packs_epi32(e0, e1), _mm_packs_epi32(e2, e3));
            _mm_movemask_epi8(all) as u32
        }
    }

    /// AVX2: mask of the 8 equal u32 lanes of `a` and `b`.
    ///
    /// # Safety
    /// `a` and `b` are valid for 8 u32 reads; AVX2 is present.
    #[inline(always)]
    unsafe fn eq8_avx2(a: *const u32, b: *const u32) -> u32 {
        // SAFETY: the caller guarantees 32 readable bytes at each (unaligned loads) and AVX2.
        unsafe {
            let x = _mm256_loadu_si256(a.cast::<__m256i>());
            let y = _mm256_loadu_si256(b.cast::<__m256i>());
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, y))) as u32
        }
    }

    /// Algorithm 1 of the paper: 4 compares, 3 packs, movemask (then tzcnt in the caller).
    /// The paper prints `_mm_packs_epi32` for the third pack too; packing the two 16-bit
    /// vectors into bytes needs `_mm_packs_epi16` (the 32-bit pack would saturate pairs of
    /// 0xFFFF/0x0000 lanes into 0x7FFF/0x8000 and scramble the mask).
    pub(crate) struct Sse2;
    pub(crate) struct Avx2;
    pub(crate) struct Avx512;

    impl Kernel for Sse2 {
        #[inline(always)]
        unsafe fn find(line: &Line, key: u32, occ: u16) -> u32 {
            let p = line.0.as_ptr().cast::<__m128i>();
            // SAFETY: `Line` is 64-byte aligned and 64 bytes long, so the four 16-byte loads at
            // p, p+1, p+2, p+3 are aligned and in bounds; the caller guarantees SSE2.
            unsafe {
                let item = _mm_set1_epi32(key as i32);
                let a = _mm_cmpeq_epi32(item, _mm_load_si128(p));
                let b = _mm_cmpeq_epi32(item, _mm_load_si128(p.add(1)));
                let c = _mm_cmpeq_epi32(item, _mm_load_si128(p.add(2)));
                let d = _mm_cmpeq_epi32(item, _mm_load_si128(p.add(3)));
                let ab = _mm_packs_epi32(a, b);
                let cd = _mm_packs_epi32(c, d);
                let all = _mm_packs_epi16(ab, cd);
                (_mm_movemask_epi8(all) as u32) & u32::from(occ)
            }
        }

        #[inline(always)]
        unsafe fn run_starts(ks: &[u32; CHUNK]) -> u32 {
            let p = ks.as_ptr();
            // SAFETY: each compare reads 16 u32 at offsets 0, 1, 15 and 16 of the 32, all in
            // bounds; the caller guarantees SSE2.
            unsafe {
                let lo = eq16_sse2(p.add(1), p);
                let hi = eq16_sse2(p.add(16), p.add(15));
                starts_from_neq(!lo, !hi)
            }
        }
    }

    impl Kernel for Avx2 {
        #[inline(always)]
        unsafe fn find(line: &Line, key: u32, occ: u16) -> u32 {
            let p = line.0.as_ptr().cast::<__m256i>();
            // SAFETY: `Line` is 64-byte aligned and 64 bytes long, so the two 32-byte loads at
            // p and p+1 are aligned and in bounds; the caller guarantees AVX2.
            unsafe {
                let item = _mm256_set1_epi32(key as i32);
                let lo = _mm256_cmpeq_epi32(item, _mm256_load_si256(p));
                let hi = _mm256_cmpeq_epi32(item, _mm256_load_si256(p.add(1)));
                let lo = _mm256_movemask_ps(_mm256_castsi256_ps(lo)) as u32;
                let hi = _mm256_movemask_ps(_mm256_castsi256_ps(hi)) as u32;
                (lo | (hi << 8)) & u32::from(occ)
            }
        }

        #[inline(always)]
        unsafe fn run_starts(ks: &[u32; CHUNK]) -> u32 {
            let p = ks.as_ptr();
            // SAFETY: each compare reads 8 u32 at offsets 0, 1, 8, 9, 15, 16, 23 and 24 of the
            // 32, all in bounds; the caller guarantees AVX2.
            unsafe {
                let lo = eq8_avx2(p.add(1), p) | eq8_avx2(p.add(9), p.add(8)) << 8;
                let hi = eq8_avx2(p.add(16), p.add(15)) | eq8_avx2(p.add(24), p.add(23)) << 8;
                starts_from_neq(!lo, !hi)
            }
        }
    }

    impl Kernel for Avx512 {
        #[inline(always)]
        unsafe fn find(line: &Line, key: u32, occ: u16) -> u32 {
            // SAFETY: `Line` is one aligned 64-byte line, exactly one 512-bit load; the caller
            // guarantees AVX-512F. The occupancy mask is applied by the compare itself.
            unsafe {
                let v = _mm512_load_epi32(line.0.as_ptr().cast::<i32>());
                u32::from(_mm512_mask_cmpeq_epi32_mask(
                    occ,
                    v,
                    _mm512_set1_epi32(key as i32),
                ))
            }
        }

        #[inline(always)]
        unsafe fn run_starts(ks: &[u32; CHUNK]) -> u32 {
            let p = ks.as_ptr().cast::<i32>();
            // SAFETY: each unaligned 512-bit load reads 16 u32 at offsets 0, 1, 15 and 16 of
            // the 32, all in bounds; the caller guarantees AVX-512F.
            unsafe {
                let lo =
                    _mm512_cmpneq_epi32_mask(_mm512_loadu_epi32(p.add(1)), _mm512_loadu_epi32(p));
                let hi = _mm512_cmpneq_epi32_mask(
                    _mm512_loadu_epi32(p.add(16)),
                    _mm512_loadu_epi32(p.add(15)),
                );
                starts_from_neq(u32::from(lo), u32::from(hi))
            }
        }
    }

    /// # Safety
    /// The CPU must support SSE2.
    #[target_feature(enable = "sse2")]
    pub(crate) unsafe fn find_sse2_entry(line: &Line, key: u32, occ: u16) -> u32 {
        // SAFETY: this function's own target feature is the one the kernel needs.
        unsafe { Sse2::find(line, key, occ) }
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn find_avx2_entry(line: &Line, key: u32, occ: u16) -> u32 {
        // SAFETY: this function's own target feature is the one the kernel needs.
        unsafe { Avx2::find(line, key, occ) }
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn find_avx512_entry(line: &Line, key: u32, occ: u16) -> u32 {
        // SAFETY: this function's own target feature is the one the kernel needs.
        unsafe { Avx512::find(line, key, occ) }
    }

    /// # Safety
    /// The CPU must support SSE2.
    #[target_feature(enable = "sse2")]
    pub(crate) unsafe fn run_starts_sse2_entry(ks: &[u32; CHUNK]) -> u32 {
        // SAFETY: this function's own target feature is the one the kernel needs.
        unsafe { Sse2::run_starts(ks) }
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn run_starts_avx2_entry(ks: &[u32; CHUNK]) -> u32 {
        // SAFETY: this function's own target feature is the one the kernel needs.
        unsafe { Avx2::run_starts(ks) }
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn run_starts_avx512_entry(ks: &[u32; CHUNK]) -> u32 {
        // SAFETY: this function's own target feature is the one the kernel needs.
        unsafe { Avx512::run_starts(ks) }
    }
}

pub(crate) use key::prefetch as prefetch_ptr;

/// Whether this CPU can run `simd` (`Off` always; `Auto` always, it resolves to what exists).
pub fn available(simd: Simd) -> bool {
    match simd {
        Simd::Off | Simd::Auto => true,
        #[cfg(target_arch = "x86_64")]
        Simd::Sse2 => std::arch::is_x86_feature_detected!("sse2"),
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
        #[cfg(not(target_arch = "x86_64"))]
        _ => false,
    }
}

/// 0 = not detected yet; otherwise 1 + index into `ORDER`.
static DETECTED: AtomicU8 = AtomicU8::new(0);

/// Preference order of `Auto`: widest compare first.
const ORDER: [Simd; 4] = [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Off];

/// The backend `Auto` resolves to on this CPU (detected once, then cached).
/// The kernel `simd` stands for (`Auto`: the detected best), if this CPU has it: the one rule
/// the aggregator and the kernel-comparing helpers share.
pub fn resolve(simd: Simd) -> Option<Simd> {
    match simd {
        Simd::Auto => Some(detect()),
        s => available(s).then_some(s),
    }
}

pub fn detect() -> Simd {
    let d = DETECTED.load(Ordering::Relaxed);
    if let Some(s) = (d as usize).checked_sub(1).and_then(|i| ORDER.get(i)) {
        return *s;
    }
    let i = ORDER
        .iter()
        .position(|&s| available(s))
        .unwrap_or(ORDER.len() - 1);
    DETECTED.store(i as u8 + 1, Ordering::Relaxed);
    ORDER[i]
}
