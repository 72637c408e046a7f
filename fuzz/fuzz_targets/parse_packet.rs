//! Packet parsing never panics: the first 2 bytes choose the link type, the rest is the frame.
//! Both tunnel modes are parsed (MPLS, PPPoE and every tunnel decoder run on each input).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((l, frame)) = data.split_first_chunk::<2>() else {
        return;
    };
    let link = u32::from(u16::from_le_bytes(*l));
    for tunnel in wire::Tunnel::ALL {
        let v = wire::parse_with(link, frame, tunnel);
        // A non-IP class must carry the all-zero tuple the View documents.
        if !v.class.is_ip() {
            assert_eq!(v.tuple, trace::Tuple::default());
        }
        // The fast path and the general parser agree.
        let kind = key::KeyKind::FiveTuple;
        assert_eq!(
            wire::parse_key_with(link, frame, kind, tunnel),
            wire::parse_key_general_with(link, frame, kind, tunnel)
        );
    }
    assert_eq!(wire::parse(link, frame), wire::parse_with(link, frame, wire::Tunnel::Outer));
});
