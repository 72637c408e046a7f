//! Any bytes, read as a snapshot file and, framed with a valid header and checksum, as a
//! snapshot body, and every instance state in it restored through its catalog entry, as well as
//! the raw bytes given to every entry's `load`: never a panic, never an allocation beyond what
//! the input can justify (docs/snapshot-format.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = snapshot::decode(data);
    if let Ok(s) = snapshot::decode(&snapshot::frame(data)) {
        for i in &s.instances {
            let _ = snapshot::restore_instance(i);
        }
    }
    for e in catalog::ALL {
        let _ = (e.load)(data);
    }
});
