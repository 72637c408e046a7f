//! Keys packed into u64 words: byte 0 is the key length, bytes 1..=len the key bytes, the rest
//! zero, read little-endian. A structure built for `key_len`-byte keys uses
//! `words(key_len)` words per key, so comparing keys is comparing one to five words and XOR-ing
//! keys (FlowRadar's FlowXOR) is XOR-ing words. Keeping the length inside the packed form lets a
//! structure hold keys of several lengths up to its capacity (IPv4 and IPv6 `src` keys) without
//! ambiguity: zero-padding alone would make a 4-byte key and its zero-extended 16-byte form equal.

use key::{FlowKey, MAX_KEY_LEN};

/// Words of the longest key (37 bytes + the length byte).
pub(crate) const MAX_WORDS: usize = (MAX_KEY_LEN + 1).div_ceil(8);

/// `Ok` when a loaded table of `stride`-word entries (a count, then a key in `kw` words) is
/// whole: `kw` a key's words (1 to [`MAX_WORDS`]), whole entries, `len` of them filled (a
/// non-zero count), each filled one's key unpacking to a key of at most `kw` words. The tables
/// size their scans and bound their probes by these (`algo::CheckState`).
pub(crate) fn check_entries(
    slots: &[u64],
    stride: usize,
    kw: usize,
    len: usize,
) -> Result<(), String> {
    if kw == 0 || kw > MAX_WORDS || stride != kw + 1 || slots.len() % stride != 0 {
        return Err(format!(
            "{} words in entries of {stride} with keys of {kw} words",
            slots.len()
        ));
    }
    let mut filled = 0usize;
    for e in slots.chunks_exact(stride) {
        if e[0] == 0 {
            continue;
        }
        filled += 1;
        if !unpack(&e[1..]).is_some_and(|k| fits(&k, kw)) {
            return Err(format!("entry {} holds no key", filled - 1));
        }
    }
    if filled != len {
        return Err(format!("{filled} filled entries, the table counts {len}"));
    }
    Ok(())
}

/// Words needed for keys of up to `key_len` bytes.
pub(crate) fn words(key_len: usize) -> usize {
    (key_len.min(MAX_KEY_LEN) + 1).div_ceil(8)
}

/// True when `key` fits in `kw` words.
#[inline]
pub(crate) fn fits(key: &FlowKey, kw: usize) -> bool {
    fits_len(key.len(), kw)
}

/// True when a key of `len` bytes fits in `kw` words (its length byte and its bytes).
#[inline]
pub(crate) fn fits_len(len: usize, kw: usize) -> bool {
    len < kw * 8
}

/// The packed form of `key` (all `MAX_WORDS` words; a structure uses the first `kw`, the others
/// are zero whenever `fits(key, kw)`).
#[inline]
pub(crate) fn pack(key: &FlowKey) -> [u64; MAX_WORDS] {
    let mut b = [0u8; MAX_WORDS * 8];
    let k = key.as_bytes();
    b[0] = k.len() as u8;
    b[1..1 + k.len()].copy_from_slice(k);
    let mut w = [0u64; MAX_WORDS];
    for (wi, c) in w.iter_mut().zip(b.chunks_exact(8)) {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        *wi = u64::from_le_bytes(a);
    }
    w
}

/// The key packed in `words`, or `None` if the words are not a valid packed key (length byte too
/// large for the words, or non-zero bytes past the key), which happens only for corrupted or
/// inconsistent state (e.g. a FlowRadar cell holding the XOR of several keys).
pub(crate) fn unpack(words: &[u64]) -> Option<FlowKey> {
    let mut b = [0u8; MAX_WORDS * 8];
    for (c, w) in b.chunks_exact_mut(8).zip(words) {
        c.copy_from_slice(&w.to_le_bytes());
    }
    let n = words.len().min(MAX_WORDS) * 8;
    let len = b[0] as usize;
    if len + 1 > n || b[1 + len..n].iter().any(|&x| x != 0) {
        return None;
    }
    FlowKey::from_bytes(&b[1..1 + len])
}

/// The (key, count) pairs of a slot array of `stride` words, count first then the packed key;
/// count 0 is an empty slot. The exact tables' tests use it as the full-pass reference.
#[cfg(test)]
pub(crate) fn scan(words: &[u64], stride: usize) -> Vec<algo::Estimate> {
    words
        .chunks_exact(stride)
        .filter(|s| s[0] != 0)
        .map(|s| (unpack(&s[1..]).unwrap(), s[0]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_length() {
        for len in 0..=MAX_KEY_LEN {
            let bytes: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            let k = FlowKey::from_bytes(&bytes).unwrap();
            let kw = words(len);
            assert!(fits(&k, kw));
            let p = pack(&k);
            assert!(p[kw..].iter().all(|&w| w == 0));
            assert_eq!(unpack(&p[..kw]), Some(k));
        }
        assert_eq!(words(4), 1);
        assert_eq!(words(13), 2);
        assert_eq!(words(37), 5);
        assert!(!fits(&FlowKey::from_bytes(&[0; 16]).unwrap(), words(4)));
    }

    #[test]
    fn lengths_keep_keys_apart_and_garbage_is_rejected() {
        let a = pack(&FlowKey::from_bytes(&[0, 0, 0, 0]).unwrap());
        let b = pack(&FlowKey::from_bytes(&[0, 0, 0, 0, 0]).unwrap());
        assert_ne!(a[0], b[0]);
        // XOR of two different keys of the same length has length byte 0 and non-zero bytes.
        let x = pack(&FlowKey::from_u32(1))[0] ^ pack(&FlowKey::from_u32(2))[0];
        assert_eq!(unpack(&[x]), None);
        assert_eq!(unpack(&[0xff]), None);
        assert_eq!(unpack(&[]), None);
    }
}
