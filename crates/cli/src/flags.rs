//! Value parsers of numeric flags: each states its range, and the error for a value outside it
//! (negative ones included: those flags take `allow_negative_numbers`, so `-1` reaches the parser
//! instead of being taken for a flag) says what the range is. Clap prefixes the flag's name:
//! `invalid value '-1' for '--threshold <THRESHOLD>': must be a positive number, got -1`.

use std::ops::RangeInclusive;

/// A whole number in `range` (a flag that sizes something: the range bounds what it allocates).
pub fn whole<T>(
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let v = s
            .parse::<u64>()
            .ok()
            .filter(|v| range.contains(v))
            .and_then(|v| T::try_from(v).ok());
        let (lo, hi) = (range.start(), range.end());
        // Digits only, yet refused: above the range, or past u64 (issue 34.9: an overflowing
        // value was told it must be ">= 1").
        let too_large = !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && s.parse::<u64>()
                .ok()
                .is_none_or(|v| v > *hi || T::try_from(v).is_err());
        v.ok_or_else(|| match hi {
            _ if too_large => format!("too large: must be a whole number in {lo}..={hi}, got {s}"),
            &u64::MAX => format!("must be a whole number >= {lo}, got {s}"),
            hi => format!("must be a whole number in {lo}..={hi}, got {s}"),
        })
    }
}

/// A seed: any unsigned 64-bit value.
pub fn seed(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| {
        format!(
            "seeds are unsigned: a whole number in 0..={}, got {s}",
            u64::MAX
        )
    })
}

/// A threshold: a positive finite number (below 1 a fraction, else an absolute value).
pub fn threshold(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t > 0.0 && t.is_finite() => Ok(t),
        _ => Err(format!(
            "must be a positive number (below 1: a fraction; 1 or more: an absolute value), got {s}"
        )),
    }
}

/// A rate in Gbit/s (`--nic-gbps`): a positive finite number.
pub fn gbps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(g) if g > 0.0 && g.is_finite() => Ok(g),
        _ => Err(format!("must be a positive number of Gbit/s, got {s}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_enforced_and_named() {
        let p = whole::<usize>(1..=1000);
        assert_eq!(p("1000"), Ok(1000));
        for bad in ["0", "1001", "-1", "18446744073709551615", "x", ""] {
            let e = p(bad).unwrap_err();
            assert!(e.contains("1..=1000") && e.contains(bad), "{e}");
        }
        let e = whole::<u64>(1..=u64::MAX)("-1").unwrap_err();
        assert!(e.contains(">= 1") && e.contains("-1"), "{e}");
        // Past u64, or past the range: said to be too large, with the range.
        for (p, big) in [
            (whole::<usize>(1..=u64::MAX), "99999999999999999999999"),
            (whole::<usize>(1..=1000), "1001"),
            (whole::<usize>(1..=1000), "99999999999999999999999"),
        ] {
            let e = p(big).unwrap_err();
            assert!(e.starts_with("too large") && e.contains(big), "{e}");
            assert!(!e.contains(">="), "{e}");
        }
        let e = whole::<u8>(0..=u64::MAX)("300").unwrap_err();
        assert!(e.starts_with("too large"), "{e}");
        assert!(!whole::<usize>(1..=1000)("0")
            .unwrap_err()
            .contains("too large"));
        assert_eq!(seed("18446744073709551615"), Ok(u64::MAX));
        assert!(seed("-1").unwrap_err().contains("unsigned"));
        assert_eq!(threshold("0.5"), Ok(0.5));
        for bad in ["0", "-1", "inf", "NaN", "x"] {
            assert!(threshold(bad).unwrap_err().contains("positive"), "{bad}");
        }
    }
}

/// A memory budget: a [`size`] of at least 1 MiB.
pub fn bytes(s: &str) -> Result<u64, String> {
    let v = size(s)?;
    if v < 1 << 20 {
        return Err(format!("must be at least 1M, got {s}"));
    }
    Ok(v)
}

/// A size in bytes: a whole number, optionally with a binary suffix `K`, `M`, `G` or `T`
/// (`8K`, `512M`, `8G`).
pub fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("unknown unit `{c}` (K, M, G or T), got {s}")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let v = num
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("must be a size in bytes such as 8K, 800M or 8G, got {s}"))?;
    Ok(v)
}

pub use engine::config::default_memory_budget;

#[cfg(test)]
mod bytes_tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units_and_refuse_the_rest() {
        assert_eq!(bytes("8G"), Ok(8 << 30));
        assert_eq!(bytes("512m"), Ok(512 << 20));
        assert_eq!(bytes("2097152"), Ok(2 << 20));
        for bad in ["", "-1", "8X", "1K", "G", "99999999999T"] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
    }
}

/// `--host`: an id that can go into a file name (`snapshot::check_host`).
pub fn host_id(s: &str) -> Result<String, String> {
    snapshot::check_host(s).map(|_| s.to_string())
}

/// `--recover` (`run`, `merge`, `controller`): how the fast path's part is recovered.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum RecoverArg {
    Sketchvisor,
    /// The uniform-overflow prior when the epoch fits it, else sketchvisor.
    Proportional,
    Lower,
    Upper,
    None,
}

impl From<RecoverArg> for visor::Method {
    fn from(r: RecoverArg) -> Self {
        match r {
            RecoverArg::Sketchvisor => visor::Method::Sketchvisor,
            RecoverArg::Proportional => visor::Method::Proportional,
            RecoverArg::Lower => visor::Method::Lower,
            RecoverArg::Upper => visor::Method::Upper,
            RecoverArg::None => visor::Method::None,
        }
    }
}
