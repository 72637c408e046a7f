//! Packet parsing never panics: the first 2 bytes choose the link type, the rest is the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((l, frame)) = data.split_first_chunk::<2>() else {
        return;
    };
    let link = u32::from(u16::from_le_bytes(*l));
    let v = wire::parse(link, frame);
    // A non-IP class must carry the all-zero tuple the View documents.
    if !v.class.is_ip() {
        assert_eq!(v.tuple, trace::Tuple::default());
    }
});
