//! The checks a snapshot from another host passes before it is merged (issue 33: "one forged
//! snapshot stops all reports"). A snapshot's checksum guards against bit rot, not an
//! adversary: a host, or whoever can write to the stream, can send a well-framed snapshot whose
//! states claim any size. [`validate`] restores every instance under a memory limit taken from
//! the parameters the snapshot names, before anything of that size is allocated, and checks
//! that what it restored is what those parameters build.

use std::str::FromStr;

use algo::{BuildCtx, Side};
use key::KeyKind;

use crate::{restore_instance, Snapshot};

/// Check snapshot `s` before merging it: every instance restores (each state's own checks,
/// `algo::CheckState`) within the memory its `params` give it (what its catalog entry computes
/// for them, as built or as a run serving flow size alone narrows them) and was built with
/// those parameters and the snapshot's seed (an instance built from them merges it); the
/// parameters are valid for the entry; the key kinds and sides are known; each fast-path
/// summary is well formed; and, with `max_memory`, the instances and summaries together fit
/// it, checked before any state is restored.
///
/// The error is one line naming the instance (index, algorithm, key kind) or part and the
/// field. Costs a restore of every state (the merge restores them again).
pub fn validate(s: &Snapshot, max_memory: Option<u64>) -> Result<(), String> {
    let mut kinds = Vec::with_capacity(s.kinds.len());
    for k in &s.kinds {
        kinds.push(KeyKind::from_str(k).map_err(|_| format!("kinds: unknown key kind {k:?}"))?);
    }
    if !s.fast.is_empty() && s.fast.len() != s.kinds.len() {
        return Err(format!(
            "fast: {} fast-path parts for {} key kinds",
            s.fast.len(),
            s.kinds.len()
        ));
    }
    // IPv6 sizing decides the key length an instance was built for (`measure`'s `ipv6`).
    let config: toml::Table = s
        .config
        .parse()
        .map_err(|e: toml::de::Error| format!("config: {}", e.message().trim_end()))?;
    let ipv6 = config
        .get("ipv6")
        .and_then(toml::Value::as_bool)
        .unwrap_or(false);
    let mut budget = Budget::new(max_memory);
    for (k, part) in s.fast.iter().enumerate() {
        if part.kind != s.kinds[k] {
            return Err(format!(
                "fast[{k}]: kind {:?}, the snapshot's kind {k} is {:?}",
                part.kind, s.kinds[k]
            ));
        }
        if let Some(sum) = &part.summary {
            sum.check()
                .map_err(|e| format!("fast[{k}] ({}) summary: {e}", part.kind))?;
            let bytes = (sum.flows.len() * std::mem::size_of::<visor::Tracked>()) as u64;
            budget
                .take(bytes)
                .map_err(|e| format!("fast[{k}] ({}) summary: {e}", part.kind))?;
        }
    }
    // First every instance's memory from its parameters, against the budget: nothing is
    // restored before the whole snapshot is known to fit.
    let mut plans = Vec::with_capacity(s.instances.len());
    for (i, inst) in s.instances.iter().enumerate() {
        let name = |field: &str, e: String| {
            format!(
                "instance {i} ({}, {}) {field}: {e}",
                inst.algorithm, inst.kind
            )
        };
        let entry =
            catalog::lookup(&inst.algorithm).map_err(|e| name("algorithm", e.to_string()))?;
        let kind = KeyKind::from_str(&inst.kind)
            .ok()
            .filter(|k| kinds.contains(k))
            .ok_or_else(|| name("kind", "not one of the snapshot's key kinds".into()))?;
        let side = match inst.side.as_str() {
            "src" => Side::Src,
            "dst" => Side::Dst,
            other => return Err(name("side", format!("{other:?} is neither src nor dst"))),
        };
        let params: toml::Table = inst
            .params
            .parse()
            .map_err(|e: toml::de::Error| name("params", e.message().trim_end().to_string()))?;
        let ctx = BuildCtx {
            seed: s.seed,
            key_len: kind.len(ipv6),
            side,
        };
        let built = entry
            .memory(&params, &ctx)
            .map_err(|e| name("params", e.to_string()))?;
        // A run builds an instance serving flow size alone with its entry's narrowed
        // parameters, under the same `params` (`measure`'s plan): either figure is its own.
        let mut narrowed = params.clone();
        for (k, v) in entry.flow_size_only_params() {
            narrowed.entry(k).or_insert(v);
        }
        let alone = entry.memory(&narrowed, &ctx).ok();
        let most = built.max(alone.unwrap_or(0));
        budget.take(most).map_err(|e| name("params", e))?;
        plans.push(Plan {
            entry,
            ctx,
            params,
            narrowed,
            most,
        });
    }
    for (i, (inst, plan)) in s.instances.iter().zip(plans).enumerate() {
        let name = |field: &str, e: String| {
            format!(
                "instance {i} ({}, {}) {field}: {e}",
                inst.algorithm, inst.kind
            )
        };
        let a = algo::with_load_limit(plan.most, || restore_instance(inst))
            .map_err(|e| name("state", e))?;
        // Built with its parameters: an instance built from them (as a run builds it, or
        // narrowed for flow size alone) takes the restored one in a merge, which checks the
        // type, configuration, sizes and hash seeds (`algo::merge_peer`). (Memory figures
        // cannot be compared: a restored instance's vectors and maps have the capacity of
        // what they hold, not the built one's.) One instance at a time, dropped at once.
        let fits = |p: &toml::Table| {
            plan.entry
                .build(p, &plan.ctx)
                .ok()
                .is_some_and(|mut b| b.merge(a.as_ref()).is_ok())
        };
        let built_so = fits(&plan.params) || (plan.narrowed != plan.params && fits(&plan.narrowed));
        if !built_so {
            return Err(name(
                "state",
                "its configuration, sizes or seeds are not those its params build".into(),
            ));
        }
    }
    Ok(())
}

/// One instance's entry, context and parameters (as named, and narrowed for flow size alone),
/// and the most memory they allocate.
struct Plan {
    entry: &'static algo::Entry,
    ctx: BuildCtx,
    params: toml::Table,
    narrowed: toml::Table,
    most: u64,
}

/// What is left of `--max-memory`.
struct Budget {
    max: Option<u64>,
    used: u64,
}

impl Budget {
    fn new(max: Option<u64>) -> Budget {
        Budget { max, used: 0 }
    }

    fn take(&mut self, bytes: u64) -> Result<(), String> {
        self.used = self.used.saturating_add(bytes);
        match self.max {
            Some(m) if self.used > m => Err(format!(
                "{bytes} bytes, which bring the snapshot to {} bytes, past the memory limit of {m}",
                self.used
            )),
            _ => Ok(()),
        }
    }
}
