//! Writes the fuzz corpora of the forged cases that aborted or hung before loaded states were
//! checked (issue 33), listed in `fuzz/seeds/forged_cases.txt`:
//! - `fuzz/seeds/snapshot_state/<label>-<byte>-<value>`: the `snapshot_state` target's input
//!   (the sample's index, then one mutation setting that varint: `snapshot::forge::mutation_for`);
//! - `fuzz/seeds/decode_snapshot/<label>-<byte>-<value>.nss`: a whole snapshot file (valid
//!   header and checksum) holding the forged state, for the `decode_snapshot` target; the first
//!   four cases of each state only (the files are a few KB each, the cases of one state alike).
//!
//! `cargo run -p snapshot --example forge_corpus [REPO_ROOT]` (default: the current directory).

use std::path::PathBuf;

use snapshot::forge;

fn main() -> Result<(), String> {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let corpus = root.join("fuzz/seeds");
    let list = std::fs::read_to_string(corpus.join("forged_cases.txt"))
        .map_err(|e| format!("{}: {e}", corpus.join("forged_cases.txt").display()))?;
    let samples = forge::samples()?;
    let body = forge::body_sample()?;
    let (states, files) = (
        corpus.join("snapshot_state"),
        corpus.join("decode_snapshot"),
    );
    for d in [&states, &files] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let mut written = 0;
    let mut per_state = std::collections::BTreeMap::<String, usize>::new();
    for line in list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [label, at, value, ..] = f[..] else {
            return Err(format!("bad line: {line}"));
        };
        let at: usize = at.parse().map_err(|_| format!("bad offset: {line}"))?;
        let value: u64 = value.parse().map_err(|_| format!("bad value: {line}"))?;
        let (index, state) = match samples.iter().position(|s| s.label == label) {
            Some(i) => (i, &samples[i].state),
            None if label == "snapshot_body" => (samples.len(), &body.body),
            None => return Err(format!("no sample {label}")),
        };
        let Some(m) = forge::mutation_for(state, at, value) else {
            return Err(format!(
                "{label}: no varint at byte {at} (has the state's layout changed?)"
            ));
        };
        let name = format!("{label}-{at}-{value}");
        let mut input = vec![index as u8];
        input.extend_from_slice(&m);
        let write = |p: PathBuf, b: &[u8]| {
            std::fs::write(&p, b).map_err(|e| format!("{}: {e}", p.display()))
        };
        write(states.join(&name), &input)?;
        let forged = forge::substitute(state, at, value).ok_or("no varint")?;
        let file = match samples.get(index) {
            Some(s) => {
                let mut snap = body.good.clone();
                snap.instances = vec![s.instance(forged)];
                snap.fast.clear();
                snap.kinds = vec![snap.instances[0].kind.clone()];
                snapshot::encode(&snap)
            }
            None => snapshot::frame(&forged),
        };
        let same = per_state.entry(label.to_string()).or_insert(0);
        *same += 1;
        if *same <= 4 {
            write(files.join(format!("{name}.nss")), &file)?;
        }
        written += 1;
    }
    println!(
        "{written} forged cases written to {} and {}",
        states.display(),
        files.display()
    );
    Ok(())
}
