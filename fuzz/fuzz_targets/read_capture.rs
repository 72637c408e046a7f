//! Any bytes, read as every format (forced and auto-detected), must never panic or hang, and
//! `records()` and `for_each` must deliver the same records and the same error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trace::{Capture, Format};

const CHOICES: [(&str, Option<Format>); 9] = [
    ("fuzz", None),
    ("fuzz.dat", None),
    ("fuzz.keys4", None),
    ("fuzz.keys21", None),
    ("fuzz", Some(Format::Pcap)),
    ("fuzz", Some(Format::Pcapng)),
    ("fuzz", Some(Format::Keys4)),
    ("fuzz", Some(Format::Keys13)),
    ("fuzz", Some(Format::Keys21)),
];

fuzz_target!(|data: &[u8]| {
    for (name, format) in CHOICES {
        let Ok(cap) = Capture::from_bytes(name, data.to_vec(), format) else {
            continue;
        };
        let mut via_iter = Vec::new();
        let mut iter_err = None;
        for r in cap.records() {
            match r {
                Ok(r) => via_iter.push(r),
                Err(e) => iter_err = Some(e.to_string()),
            }
            assert!(via_iter.len() <= data.len() / 4 + 1, "runaway record loop");
        }
        let mut via_each = Vec::new();
        let each = cap.for_each(|r| via_each.push(r));
        assert_eq!(via_iter, via_each);
        match (each, iter_err) {
            (Ok(n), None) => assert_eq!(n, via_iter.len() as u64),
            (Err(a), Some(b)) => assert_eq!(a.to_string(), b),
            (a, b) => panic!("for_each {a:?} vs records() {b:?}"),
        }
    }
});
