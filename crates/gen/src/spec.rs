//! The trace specification: a serde config struct, separate from the [`crate::Generator`] it
//! builds, validated once with errors that name the offending field.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most flows a spec may ask for. The flow table (16 bytes a flow), the Zipf alias table
/// (12 bytes) and the uniqueness set make about 1.5 GB at this size.
pub const MAX_FLOWS: u64 = 1 << 25;
/// Size of the client address space (16 public /8 blocks), so the most sources a spec may ask for.
pub const MAX_SOURCES: u64 = 1 << 28;
/// Smallest and largest frame (Ethernet header included, FCS excluded) a spec may ask for.
pub const MIN_FRAME: u16 = 60;
pub const MAX_FRAME: u16 = 9000;
/// Snap lengths: at least the longest generated header (Ethernet 14 + IPv4 20 + TCP 20), so
/// every captured frame carries its whole L4 header; at most what libpcap accepts.
pub const MIN_SNAPLEN: u32 = 54;
pub const MAX_SNAPLEN: u32 = 262_144;
/// Largest Zipf skew. At 10 the top flow already carries 99.9% of the packets.
pub const MAX_SKEW: f64 = 10.0;
/// Packet rates: the inter-packet gap is kept in whole picoseconds (at most 1e12 pps) and must fit
/// a u64 of picoseconds (at least 1e-6 pps).
pub const MIN_RATE_PPS: f64 = 1e-6;
pub const MAX_RATE_PPS: f64 = 1e12;
/// Trace start: 2020-01-01T00:00:00Z in nanoseconds since the Unix epoch.
pub const START_NS: u64 = 1_577_836_800 * 1_000_000_000;
/// Longest trace: the last timestamp must still fit pcap's unsigned 32-bit seconds (year 2106);
/// 2e9 s after the start leaves a margin.
pub const MAX_DURATION_NS: u64 = 2_000_000_000 * 1_000_000_000;
/// Most packets a spec may ask for: 2^40 (1.1e12). No output format has a count field to
/// overflow (pcap and the key traces are sequences of records), so the bound is what a trace can
/// be: at the smallest record (keys4, 4 bytes) 4 TiB, in pcap at least 70 bytes a packet (77 TB),
/// and at the generator's ~100 M packets/s three hours of work. The free-space check of the
/// `gen` command refuses most such traces earlier; this bound also holds for `--out -` and
/// in-memory generation.
pub const MAX_PACKETS: u64 = 1 << 40;
/// Largest mean burst (train) length.
pub const MAX_BURST_MEAN: f64 = 1e6;

/// Everything that determines a synthetic trace. Same spec → same packets, byte for byte, on
/// every host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Spec {
    /// Packets in the trace.
    pub packets: u64,
    /// Flows (distinct 5-tuples) in the flow table; the trace shows those drawn at least once.
    pub flows: u64,
    /// Zipf exponent of the flow sizes: the flow of rank r has probability ∝ 1/r^skew.
    pub skew: f64,
    /// Master seed; every random stream of the generator derives from it.
    pub seed: u64,
    /// Frame sizes.
    pub size: Size,
    /// Packet order.
    pub order: Order,
    /// Packets per second of the timestamps.
    pub rate_pps: f64,
    /// Capture length of pcap output.
    pub snaplen: u32,
    /// Size of the source-host pool. `None` = flows / 4. The trace holds exactly
    /// min(sources, flows) distinct source addresses in its flow table; with
    /// `sources = flows` every flow has its own source and per-source sizes are Zipf(skew).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<u64>,
    /// Mean train length of [`Order::Bursty`] (geometric; 1 = no trains).
    pub burst_mean: f64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            packets: 2_000_000,
            flows: 100_000,
            skew: 1.1,
            seed: 1,
            size: Size::Mix,
            order: Order::Bursty,
            rate_pps: 1e6,
            snaplen: 128,
            sources: None,
            burst_mean: 6.0,
        }
    }
}

impl Spec {
    /// Check every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.packets > MAX_PACKETS {
            return Err(SpecError::TooManyPackets(self.packets));
        }
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(SpecError::Flows(self.flows));
        }
        if !(self.skew.is_finite() && (0.0..=MAX_SKEW).contains(&self.skew)) {
            return Err(SpecError::Skew(self.skew));
        }
        if let Size::Fixed(n) = self.size {
            if !(MIN_FRAME..=MAX_FRAME).contains(&n) {
                return Err(SpecError::Size(n));
            }
        }
        if !(self.rate_pps.is_finite() && (MIN_RATE_PPS..=MAX_RATE_PPS).contains(&self.rate_pps)) {
            return Err(SpecError::RatePps(self.rate_pps));
        }
        if !(MIN_SNAPLEN..=MAX_SNAPLEN).contains(&self.snaplen) {
            return Err(SpecError::Snaplen(self.snaplen));
        }
        if let Some(s) = self.sources {
            if s == 0 || s > MAX_SOURCES {
                return Err(SpecError::Sources(s));
            }
        }
        if !(self.burst_mean.is_finite() && (1.0..=MAX_BURST_MEAN).contains(&self.burst_mean)) {
            return Err(SpecError::BurstMean(self.burst_mean));
        }
        let span = self.packets as u128 * self.period_ps() as u128 / 1000;
        if span > MAX_DURATION_NS as u128 {
            return Err(SpecError::Packets {
                packets: self.packets,
                rate_pps: self.rate_pps,
            });
        }
        Ok(())
    }

    /// Inter-packet gap in whole picoseconds (rounded; at least 1). Integer so the timestamps
    /// are exact and host-independent.
    pub fn period_ps(&self) -> u64 {
        // `as` saturates; validation bounds the rate so this is in 1..=1e18.
        ((1e12 / self.rate_pps).round() as u64).max(1)
    }

    /// Bytes the trace takes in `format`, at most: exact for the key formats, for pcap every
    /// record counted at the longest captured length the spec allows (a size mix is drawn per
    /// flow, so its exact total is known only once the packets are). For checking free space
    /// before writing.
    pub fn max_output_bytes(&self, format: OutFormat) -> u64 {
        let per_packet = match format.record_len() {
            Some(n) => n as u64,
            None => {
                let frame = match self.size {
                    Size::Fixed(n) => n,
                    Size::Mix => crate::flows::MIX
                        .iter()
                        .map(|&(l, _)| l)
                        .max()
                        .unwrap_or(MAX_FRAME),
                };
                // Record header (16 bytes) and the captured bytes.
                16 + u64::from(u32::from(frame).min(self.snaplen))
            }
        };
        let header = if format == OutFormat::Pcap { 24 } else { 0 };
        self.packets
            .saturating_mul(per_packet)
            .saturating_add(header)
    }

    /// Size of the source-host pool actually used.
    pub fn source_pool(&self) -> u64 {
        self.sources.unwrap_or(self.flows / 4).clamp(1, MAX_SOURCES)
    }

    /// Size of the destination-server pool: flows / 8 (at least 1).
    pub fn server_pool(&self) -> u64 {
        (self.flows / 8).max(1)
    }
}

/// A spec field out of range. [`SpecError::field`] gives the field's name as in the config.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("`packets` must be at most {MAX_PACKETS} (2^40), got {0}")]
    TooManyPackets(u64),
    #[error("`flows` must be in 1..={MAX_FLOWS}, got {0}")]
    Flows(u64),
    #[error("`skew` must be a finite number in 0..={MAX_SKEW}, got {0}")]
    Skew(f64),
    #[error("`size` must be `mix` or a frame length in {MIN_FRAME}..={MAX_FRAME} bytes, got {0}")]
    Size(u16),
    #[error("`rate_pps` must be a finite number in {MIN_RATE_PPS}..={MAX_RATE_PPS}, got {0}")]
    RatePps(f64),
    #[error("`snaplen` must be in {MIN_SNAPLEN}..={MAX_SNAPLEN}, got {0}")]
    Snaplen(u32),
    #[error("`sources` must be in 1..={MAX_SOURCES}, got {0}")]
    Sources(u64),
    #[error("`burst_mean` must be a finite number in 1..={MAX_BURST_MEAN}, got {0}")]
    BurstMean(f64),
    #[error(
        "`packets` = {packets} at `rate_pps` = {rate_pps} spans more than 2e9 s, past what pcap \
         timestamps hold"
    )]
    Packets { packets: u64, rate_pps: f64 },
}

impl SpecError {
    /// The config name of the offending field.
    pub fn field(&self) -> &'static str {
        match self {
            SpecError::Flows(_) => "flows",
            SpecError::Skew(_) => "skew",
            SpecError::Size(_) => "size",
            SpecError::RatePps(_) => "rate_pps",
            SpecError::Snaplen(_) => "snaplen",
            SpecError::Sources(_) => "sources",
            SpecError::BurstMean(_) => "burst_mean",
            SpecError::Packets { .. } | SpecError::TooManyPackets(_) => "packets",
        }
    }
}

/// A command-line word that is not a valid size, order or output format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} `{input}` (expected {expected})")]
pub struct ParseError {
    pub what: &'static str,
    pub input: String,
    pub expected: &'static str,
}

/// Frame sizes (Ethernet header included, FCS excluded, i.e. pcap's `orig_len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Every frame this long.
    Fixed(u16),
    /// A trimodal Internet mix chosen per flow; see the crate docs.
    Mix,
}

impl FromStr for Size {
    type Err = ParseError;
    /// `"mix"` or a decimal frame length such as `"64"`. Range is checked by [`Spec::validate`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("mix") {
            return Ok(Size::Mix);
        }
        s.parse::<u16>().map(Size::Fixed).map_err(|_| ParseError {
            what: "size",
            input: s.to_string(),
            expected: "`mix` or a frame length in bytes such as `64`",
        })
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Fixed(n) => write!(f, "{n}"),
            Size::Mix => f.write_str("mix"),
        }
    }
}

/// `size = 64` or `size = "mix"` (or `size = "64"`) in a config.
impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Size::Fixed(n) => s.serialize_u16(*n),
            Size::Mix => s.serialize_str("mix"),
        }
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => u16::try_from(n)
                .map(Size::Fixed)
                .map_err(|_| serde::de::Error::custom(format!("size {n} is too large"))),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Packet order of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Every packet's flow drawn independently: flows fully interleaved.
    Shuffled,
    /// The same per-flow packet counts, emitted in trains of geometric length.
    Bursty,
}

impl FromStr for Order {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "shuffled" => Ok(Order::Shuffled),
            "bursty" => Ok(Order::Bursty),
            _ => Err(ParseError {
                what: "order",
                input: s.to_string(),
                expected: "`shuffled` or `bursty`",
            }),
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Shuffled => "shuffled",
            Order::Bursty => "bursty",
        })
    }
}

/// File format written by [`crate::write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutFormat {
    /// Little-endian nanosecond pcap (magic a1b23c4d), LINKTYPE_ETHERNET.
    Pcap,
    /// 4-byte records: source IPv4 address, network order.
    Keys4,
    /// 13-byte records: src, dst, sport, dport (network order), proto.
    Keys13,
    /// 21-byte records: the 13 bytes of `keys13`, then the timestamp as little-endian u64 ns
    /// since the Unix epoch.
    Keys21,
}

impl OutFormat {
    pub const ALL: [OutFormat; 4] = [
        OutFormat::Pcap,
        OutFormat::Keys4,
        OutFormat::Keys13,
        OutFormat::Keys21,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OutFormat::Pcap => "pcap",
            OutFormat::Keys4 => "keys4",
            OutFormat::Keys13 => "keys13",
            OutFormat::Keys21 => "keys21",
        }
    }

    /// Bytes per packet of the fixed-record key formats; `None` for pcap.
    pub fn record_len(self) -> Option<usize> {
        match self {
            OutFormat::Pcap => None,
            OutFormat::Keys4 => Some(4),
            OutFormat::Keys13 => Some(13),
            OutFormat::Keys21 => Some(21),
        }
    }
}

impl FromStr for OutFormat {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let l = s.to_ascii_lowercase();
        OutFormat::ALL
            .into_iter()
            .find(|f| f.name() == l)
            .ok_or_else(|| ParseError {
                what: "output format",
                input: s.to_string(),
                expected: "`pcap`, `keys4`, `keys13` or `keys21`",
            })
    }
}

impl fmt::Display for OutFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_matches_the_brief() {
        let s = Spec::default();
        s.validate().unwrap();
        assert_eq!(
            (s.packets, s.flows, s.seed, s.snaplen),
            (2_000_000, 100_000, 1, 128)
        );
        assert_eq!((s.size, s.order), (Size::Mix, Order::Bursty));
        assert_eq!(s.period_ps(), 1_000_000);
        assert_eq!((s.source_pool(), s.server_pool()), (25_000, 12_500));
    }

    #[test]
    fn errors_name_the_field() {
        let bad: Vec<(Spec, &str)> = vec![
            (
                Spec {
                    flows: 0,
                    ..Spec::default()
                },
                "flows",
            ),
            (
                Spec {
                    flows: MAX_FLOWS + 1,
                    ..Spec::default()
                },
                "flows",
            ),
            (
                Spec {
                    skew: -0.1,
                    ..Spec::default()
                },
                "skew",
            ),
            (
                Spec {
                    skew: f64::NAN,
                    ..Spec::default()
                },
                "skew",
            ),
            (
                Spec {
                    size: Size::Fixed(59),
                    ..Spec::default()
                },
                "size",
            ),
            (
                Spec {
                    size: Size::Fixed(9001),
                    ..Spec::default()
                },
                "size",
            ),
            (
                Spec {
                    rate_pps: 0.0,
                    ..Spec::default()
                },
                "rate_pps",
            ),
            (
                Spec {
                    rate_pps: f64::INFINITY,
                    ..Spec::default()
                },
                "rate_pps",
            ),
            (
                Spec {
                    snaplen: 53,
                    ..Spec::default()
                },
                "snaplen",
            ),
            (
                Spec {
                    sources: Some(0),
                    ..Spec::default()
                },
                "sources",
            ),
            (
                Spec {
                    burst_mean: 0.5,
                    ..Spec::default()
                },
                "burst_mean",
            ),
            (
                Spec {
                    packets: 3_000_000_000,
                    rate_pps: 1.0,
                    ..Spec::default()
                },
                "packets",
            ),
            (
                Spec {
                    packets: MAX_PACKETS + 1,
                    ..Spec::default()
                },
                "packets",
            ),
        ];
        for (spec, field) in bad {
            let e = spec.validate().unwrap_err();
            assert_eq!(e.field(), field, "{e}");
            assert!(e.to_string().contains(&format!("`{field}`")), "{e}");
        }
        // Boundaries are inclusive.
        for ok in [
            Spec {
                size: Size::Fixed(60),
                snaplen: 54,
                ..Spec::default()
            },
            Spec {
                size: Size::Fixed(9000),
                skew: 0.0,
                flows: 1,
                ..Spec::default()
            },
            Spec {
                burst_mean: 1.0,
                sources: Some(MAX_SOURCES),
                ..Spec::default()
            },
        ] {
            ok.validate().unwrap();
        }
    }

    #[test]
    fn words_parse() {
        assert_eq!("mix".parse::<Size>().unwrap(), Size::Mix);
        assert_eq!("64".parse::<Size>().unwrap(), Size::Fixed(64));
        assert!("big".parse::<Size>().is_err());
        assert!("70000".parse::<Size>().is_err());
        assert_eq!("Bursty".parse::<Order>().unwrap(), Order::Bursty);
        assert!("random".parse::<Order>().is_err());
        for f in OutFormat::ALL {
            assert_eq!(f.name().parse::<OutFormat>().unwrap(), f);
            assert_eq!(f.to_string(), f.name());
        }
        assert!("keys5".parse::<OutFormat>().is_err());
    }

    #[test]
    fn toml_config_roundtrip_and_strictness() {
        let s: Spec = toml::from_str("packets = 10\nsize = 64\norder = \"shuffled\"").unwrap();
        assert_eq!(s.packets, 10);
        assert_eq!(s.size, Size::Fixed(64));
        assert_eq!(s.order, Order::Shuffled);
        assert_eq!(
            s.flows,
            Spec::default().flows,
            "missing fields take the default"
        );
        let s: Spec = toml::from_str("size = \"mix\"\nsources = 500000").unwrap();
        assert_eq!((s.size, s.sources), (Size::Mix, Some(500_000)));
        assert!(
            toml::from_str::<Spec>("flow = 3").is_err(),
            "unknown fields are rejected"
        );
        assert!(toml::from_str::<Spec>("size = \"huge\"").is_err());
        for spec in [Spec::default(), s] {
            let text = toml::to_string(&spec).unwrap();
            assert_eq!(toml::from_str::<Spec>(&text).unwrap(), spec, "{text}");
        }
    }
}
