//! Structure-aware fuzzing of snapshot states (issue 33): a real saved state per catalog entry
//! (`snapshot::forge::samples`: small parameters, a few thousand keys), and a whole snapshot
//! body with a fast-path summary, mutated at the varint level by the fuzzer's bytes
//! (`snapshot::forge::mutate`: the first byte picks the state, then 11 bytes a mutation), then
//! restored, merged with a good state both ways, merged through `merge_epoch` and queried on
//! every task (`forge::exercise`, `exercise_body`): an error or an answer, never a panic, an
//! abort or a hang (run with `-rss_limit_mb` and `-timeout`). The forged cases that aborted or
//! hung before the states were checked are its seed corpus (`fuzz/seeds/snapshot_state`,
//! written by `cargo run -p snapshot --example forge_corpus`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapshot::forge;

thread_local! {
    static SAMPLES: (Vec<forge::Sample>, forge::BodySample) = (
        forge::samples().expect("the samples build"),
        forge::body_sample().expect("the body sample builds"),
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    SAMPLES.with(|(samples, body)| {
        let i = usize::from(pick) % (samples.len() + 1);
        match samples.get(i) {
            Some(s) => {
                let _ = forge::exercise(s, &forge::mutate(&s.state, rest));
            }
            None => {
                let _ = forge::exercise_body(body, &forge::mutate(&body.body, rest));
            }
        }
    });
});
