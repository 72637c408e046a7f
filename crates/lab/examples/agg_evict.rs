//! Run the harness without the CLI:
//! `cargo run --release -p lab --example agg_evict -- FIGURE [OUT] [PACKETS] [--quick] [--trace FILE]`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = lab::LabArgs::new(lab::Figure::All, "out/agg-evict");
    args.progress = true;
    let mut pos = 0;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.quick = true,
            "--trace" => args.trace = it.next().map(PathBuf::from),
            _ => {
                match pos {
                    0 => match a.parse() {
                        Ok(f) => args.figure = f,
                        Err(e) => {
                            eprintln!("{e}");
                            return ExitCode::FAILURE;
                        }
                    },
                    1 => args.out = PathBuf::from(a),
                    _ => match a.parse() {
                        Ok(n) => args.packets = n,
                        Err(_) => {
                            eprintln!("bad packet count `{a}`");
                            return ExitCode::FAILURE;
                        }
                    },
                }
                pos += 1;
            }
        }
    }
    match lab::run_agg_evict(&args) {
        Ok(points) => {
            for p in &points {
                println!(
                    "fig {:5} {:16} {:9} key={:10} b={:5} k={:5} {:3} {:6} skew={:?} {:8} {:7.2} Mpps avg {:7.1} ns p99 {:7.1} ns share {:?} limit {:?} uniq {:?}",
                    p.figure, p.algorithm, p.accel, p.key, p.batch, p.arrays, p.policy, p.simd,
                    p.skew, p.order, p.mpps, p.ns_avg, p.ns_p99, p.evicted_share, p.limit_mpps,
                    p.unique_share
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
