//! The encapsulations a frame can carry, the set of them one frame carried ([`Encap`]), their
//! per-packet counts ([`EncapCounts`]), which IP header of a tunnel makes the key ([`Tunnel`]),
//! and the parse context threaded through the layers ([`Ctx`], crate-private).

use serde::ser::SerializeMap;

use crate::{Class, View};

/// The most encapsulation layers walked on one frame (an MPLS label stack, a pseudowire, PPPoE,
/// each tunnel header) before the frame is `Malformed` (see the crate docs).
pub const MAX_LAYERS: usize = 8;

/// The most entries of one MPLS label stack before the frame is `Malformed` (the stack counts as
/// one layer: segment routing stacks of 10-12 labels are real traffic).
pub const MAX_MPLS_LABELS: usize = 16;

/// The most Source Route Entries of one GRE routing field (RFC 1701), the terminating null entry
/// included, before the frame is `Malformed` (the field counts with its GRE header as one layer).
pub const MAX_GRE_SRES: usize = 16;

/// Which IP header of a tunnelled packet (GRE, VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS over UDP,
/// IP-in-IP, 6in4, 4in6, 6in6) makes its flow key. MPLS, PPPoE and NSH are below IP and are
/// always looked through.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Tunnel {
    /// The first IP header (tshark's first `ip.src`): tunnels are recognised and counted, not
    /// looked through.
    #[default]
    Outer,
    /// The innermost IP header the tunnels carry.
    Inner,
}

impl Tunnel {
    pub const ALL: [Tunnel; 2] = [Tunnel::Outer, Tunnel::Inner];

    pub fn name(self) -> &'static str {
        match self {
            Tunnel::Outer => "outer",
            Tunnel::Inner => "inner",
        }
    }
}

impl std::fmt::Display for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Tunnel {
    type Err = String;
    fn from_str(s: &str) -> Result<Tunnel, String> {
        Tunnel::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown tunnel mode `{s}` (expected outer or inner)"))
    }
}

/// One kind of encapsulation layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// An MPLS label stack (ethertype 0x8847/0x8848, GRE, PPP, MPLS over UDP, VXLAN-GPE, NSH).
    Mpls,
    /// An Ethernet pseudowire inside MPLS (RFC 4448), with or without a control word.
    Pseudowire,
    /// A PPPoE session (ethertype 0x8864).
    Pppoe,
    /// GRE (IP protocol 47), versions 0 (RFC 2784/2890) and 1 (PPTP, RFC 2637).
    Gre,
    /// ERSPAN types I, II and III inside GRE.
    Erspan,
    /// VXLAN (UDP destination port 4789, or Linux's older default 8472).
    Vxlan,
    /// VXLAN-GPE (UDP destination port 4790).
    VxlanGpe,
    /// A Network Service Header (RFC 8300: VXLAN-GPE, or ethertype 0x894f).
    Nsh,
    /// GENEVE (UDP destination port 6081).
    Geneve,
    /// GTP-U (UDP destination port 2152).
    GtpU,
    /// MPLS over UDP (RFC 7510, UDP destination port 6635); the label stack inside is `Mpls`.
    MplsUdp,
    /// IPv4 in IPv4 (protocol 4).
    IpIp,
    /// IPv6 in IPv4 (protocol 41).
    SixInFour,
    /// IPv4 in IPv6 (protocol 4).
    FourInSix,
    /// IPv6 in IPv6 (protocol 41).
    SixInSix,
}

impl Layer {
    pub const ALL: [Layer; 15] = [
        Layer::Mpls,
        Layer::Pseudowire,
        Layer::Pppoe,
        Layer::Gre,
        Layer::Erspan,
        Layer::Vxlan,
        Layer::VxlanGpe,
        Layer::Nsh,
        Layer::Geneve,
        Layer::GtpU,
        Layer::MplsUdp,
        Layer::IpIp,
        Layer::SixInFour,
        Layer::FourInSix,
        Layer::SixInSix,
    ];

    /// Stable name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Mpls => "mpls",
            Layer::Pseudowire => "pseudowire",
            Layer::Pppoe => "pppoe",
            Layer::Gre => "gre",
            Layer::Erspan => "erspan",
            Layer::Vxlan => "vxlan",
            Layer::VxlanGpe => "vxlan_gpe",
            Layer::Nsh => "nsh",
            Layer::Geneve => "geneve",
            Layer::GtpU => "gtp_u",
            Layer::MplsUdp => "mpls_udp",
            Layer::IpIp => "ipip",
            Layer::SixInFour => "6in4",
            Layer::FourInSix => "4in6",
            Layer::SixInSix => "6in6",
        }
    }

    /// Position in [`Layer::ALL`].
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    #[inline]
    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of encapsulation layers one frame carried (each kind once, however often nested).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Encap(u16);

// One bit per layer.
const _: () = assert!(Layer::ALL.len() <= u16::BITS as usize);

impl Encap {
    pub const NONE: Encap = Encap(0);

    #[inline]
    pub fn contains(self, l: Layer) -> bool {
        self.0 & l.bit() != 0
    }

    #[inline]
    #[must_use]
    pub const fn with(self, l: Layer) -> Encap {
        Encap(self.0 | l.bit())
    }

    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The layers in the set, in [`Layer::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Layer> {
        Layer::ALL.into_iter().filter(move |&l| self.contains(l))
    }
}

impl FromIterator<Layer> for Encap {
    fn from_iter<I: IntoIterator<Item = Layer>>(it: I) -> Encap {
        it.into_iter().fold(Encap::NONE, Encap::with)
    }
}

impl std::fmt::Debug for Encap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter().map(Layer::name)).finish()
    }
}

/// Packets counted per encapsulation layer: a packet is counted once under every kind of layer
/// it carried (an Ethernet pseudowire is counted under `mpls` and `pseudowire`), so the counts
/// do not add up to the packets; `plain` counts the packets that carried none, once each.
/// Serialized as `{ "plain": n, "mpls": n, ... }` with every layer's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncapCounts {
    pub plain: u64,
    counts: [u64; Layer::ALL.len()],
}

impl EncapCounts {
    #[inline]
    pub fn add(&mut self, e: Encap) {
        if e.is_empty() {
            self.plain += 1;
            return;
        }
        for l in e.iter() {
            self.counts[l.index()] += 1;
        }
    }

    pub fn get(&self, l: Layer) -> u64 {
        self.counts[l.index()]
    }

    /// Every layer with its count, in [`Layer::ALL`] order.
    pub fn layers(&self) -> impl Iterator<Item = (Layer, u64)> + '_ {
        Layer::ALL.into_iter().map(|l| (l, self.get(l)))
    }
}

impl serde::Serialize for EncapCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1 + Layer::ALL.len()))?;
        m.serialize_entry("plain", &self.plain)?;
        for (l, n) in self.layers() {
            m.serialize_entry(l.name(), &n)?;
        }
        m.end()
    }
}

/// What the parser carries from one layer to the next. At the top it is a constant but for the
/// mode ([`Ctx::top`]), so the common path compiles to what it was without encapsulations.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx {
    pub mode: Tunnel,
    /// The bytes handed to this layer end where the capture ended (or where a first fragment
    /// ends), not at a length some enclosing header declared. A header that needs more bytes
    /// than there are is then `Truncated`; inside a declared length it is `Malformed` (it lies
    /// about its length), and a longer capture could not change that.
    pub cut: bool,
    /// Encapsulation layers entered so far.
    pub layers: u8,
    /// The layers entered so far.
    pub encap: Encap,
}

impl Ctx {
    #[inline(always)]
    pub const fn top(mode: Tunnel) -> Ctx {
        Ctx {
            mode,
            cut: true,
            layers: 0,
            encap: Encap::NONE,
        }
    }

    /// A view of `class` carrying the layers entered so far.
    #[inline(always)]
    pub const fn view(self, class: Class) -> View {
        let mut v = View::of(class);
        v.encap = self.encap;
        v
    }

    /// A header needs bytes that are not there: `Truncated` if the capture ended, `Malformed`
    /// if an enclosing header's declared length did.
    #[inline(always)]
    pub const fn short(self) -> View {
        self.view(if self.cut {
            Class::Truncated
        } else {
            Class::Malformed
        })
    }

    #[inline(always)]
    pub const fn malformed(self) -> View {
        self.view(Class::Malformed)
    }

    /// Enter one more layer of kind `l`: the context inside it, or the `Malformed` view (which
    /// still names `l`) when [`MAX_LAYERS`] are already entered.
    #[inline]
    pub fn enter(self, l: Layer) -> Result<Ctx, View> {
        let c = Ctx {
            encap: self.encap.with(l),
            layers: self.layers + 1,
            ..self
        };
        if usize::from(self.layers) >= MAX_LAYERS {
            Err(c.malformed())
        } else {
            Ok(c)
        }
    }

    /// The bytes `p[..len]` a header declares as its own, at least `min` of them: complete
    /// (`cut` false) when all are there; what was captured when the capture ended first (at
    /// least `min` bytes, else `Truncated`); `Err` `Malformed` when `len < min`, or when `len`
    /// runs past a container that is complete.
    #[inline]
    pub fn declared(self, p: &[u8], len: usize, min: usize) -> Result<(&[u8], Ctx), View> {
        if len < min {
            return Err(self.malformed());
        }
        match p.get(..len) {
            Some(b) => Ok((b, Ctx { cut: false, ..self })),
            None if self.cut && p.len() >= min => Ok((p, self)),
            None => Err(self.short()),
        }
    }
}
