//! Paired timing of figure 5's algorithms without Agg-Evict and with it (`auto` and `always`),
//! for a shared machine: every round runs the three back to back for each algorithm (in reverse
//! order every other round), and the medians of the per-round ratios are printed, so that load
//! drifting between runs hits all three alike (one `bench agg-evict` run measures each configuration once, minutes apart from
//! the next round).
//!
//! `cargo run --release -p lab --example adapt_pairs -- [shuffled|bursty] [SKEW] [PACKETS]
//! [ROUNDS] [ALGORITHM,...]`
//! (defaults: shuffled, 1.1, 5000000, 3, figure 5's algorithms and counters-only Count-Min).
//! Prints per algorithm: median ns/packet of each mode, median ratio of speed with/without for
//! `auto` and `always`, `auto`'s share of packets through the aggregator and `always`'s share
//! of packets that reached the algorithm as updates (the cost model's `updates / packets`).

use lab::accel::AggSpec;
use lab::clock::Clock;
use lab::run::{measure, RunCfg};
use lab::workload::Workload;

use front::AggMode;
use key::KeyKind;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let order: gen::Order = args
        .first()
        .map_or("shuffled", |s| s)
        .parse()
        .expect("order: shuffled or bursty");
    let skew: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1.1);
    let packets: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let default = "count_min,count_min:candidates=0,flow_radar,rev_sketch,univmon,space_saving,two_level,mrac,fm,linear_counting";
    let list = args.get(4).map_or(default, |s| s);
    let w = Workload::zipf_500k(packets, skew, order).expect("trace");
    let clock = Clock::calibrate(std::time::Duration::from_millis(200));
    println!("# order {order:?} skew {skew} packets {packets} rounds {rounds}");
    println!(
        "# algorithm  none_ns  auto_ns  always_ns  auto/none  always/none  auto_through  \
         always_passed"
    );
    for item in list.split(',') {
        let (name, params) = item.split_once(':').unwrap_or((item, ""));
        let params: &'static str = Box::leak(params.replace(';', "\n").into_boxed_str());
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        let key = if name == "two_level" {
            KeyKind::Pair
        } else {
            KeyKind::Src
        };
        let cfg = |mode: Option<AggMode>| RunCfg {
            algorithm: name,
            params,
            agg: mode.map(|mode| AggSpec {
                mode,
                ..AggSpec::default()
            }),
            key,
            batch: 32,
            epoch: 2_000_000,
        };
        let (mut ns, mut ra, mut rl) = ([vec![], vec![], vec![]], vec![], vec![]);
        let (mut through, mut passed) = (0.0, 0.0);
        for round in 0..rounds {
            let mut one = [0.0; 3];
            let mut modes = [None, Some(AggMode::Auto), Some(AggMode::Always)];
            let mut order = [0, 1, 2];
            // Every other round backwards, so that a drift within a round (the machine's load,
            // the allocator) does not favour one mode.
            if round % 2 == 1 {
                modes.reverse();
                order.reverse();
            }
            for (i, mode) in order.into_iter().zip(modes) {
                let m = measure(&w, &cfg(mode), &clock, 7).expect("run");
                one[i] = 1e3 / m.mpps;
                if i == 1 {
                    through = m.through_share.unwrap_or(0.0);
                }
                if i == 2 {
                    passed = m.evicted_share.unwrap_or(0.0);
                }
            }
            for (v, x) in ns.iter_mut().zip(one) {
                v.push(x);
            }
            ra.push(one[0] / one[1]);
            rl.push(one[0] / one[2]);
        }
        println!(
            "{item:28} {:7.2} {:7.2} {:7.2}   {:5.3}  {:5.3}  {:5.3}  {:5.3}",
            median(&mut ns[0]),
            median(&mut ns[1]),
            median(&mut ns[2]),
            median(&mut ra),
            median(&mut rl),
            through,
            passed
        );
    }
}
