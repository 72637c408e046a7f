#!/usr/bin/env bash
# Mutation check of one crate (or some of its files), in bounded time. Not run in CI: a full run
# takes minutes to an hour per crate (docs/mutants.md gives the times and results of each run).
#
#   scripts/mutants.sh CRATE [FILE...]
#
#   CRATE   a workspace package (sketch, distinct, aggevict, ...)
#   FILE    source files of it to mutate (default: the whole crate), e.g.
#           crates/distinct/src/hyperloglog.rs
#
# Environment (defaults in brackets):
#   MUTANTS_BUDGET   wall-clock limit of the whole run, seconds [3600]
#   MUTANTS_TIMEOUT  limit of one mutant's test run, seconds [60]
#   MUTANTS_JOBS     mutants built and tested at once [1]
#   MUTANTS_OUT      output directory, holding mutants.out/ [/tmp/mutants/CRATE]
#   MUTANTS_RE       only mutants whose name matches this regex [all]
#   MUTANTS_EXCLUDE  skip mutants whose name matches this regex
#                    [configuration checks and memory accounting, tested by the catalog crate:
#                    'validate|memory_bytes|cm_bytes|ENTRY|Config|::new ->|::config ->']
#
# Mutants run on a copy of the tree (never in place), tests with `cargo test --tests` (unit and
# integration tests; no examples, benches or doc tests, which kill nothing and double the build).
# Needs cargo-mutants: `cargo install cargo-mutants --locked`.
# Results: MUTANTS_OUT/mutants.out/{caught,missed,timeout,unviable}.txt; every missed mutant must
# be killed by a test or listed in docs/mutants.md with the reason it is harmless.
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
crate=$1
shift
if ! command -v cargo-mutants >/dev/null 2>&1; then
    echo "mutants.sh: cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
out=${MUTANTS_OUT:-/tmp/mutants/$crate}
mkdir -p "$out"
args=(-p "$crate" -j "${MUTANTS_JOBS:-1}" --timeout "${MUTANTS_TIMEOUT:-60}" --build-timeout 600
    -o "$out" --no-shuffle
    --exclude-re "${MUTANTS_EXCLUDE:-validate|memory_bytes|cm_bytes|ENTRY|Config|::new ->|::config ->}")
for f in "$@"; do
    args+=(-f "$f")
done
if [ -n "${MUTANTS_RE:-}" ]; then
    args+=(--re "$MUTANTS_RE")
fi
echo "mutants.sh: $(cargo mutants --list "${args[@]}" | wc -l) mutants of $crate ${*:-(whole crate)}"
start=$(date +%s)
rc=0
timeout --signal=INT "${MUTANTS_BUDGET:-3600}" cargo mutants "${args[@]}" -C --tests || rc=$?
secs=$(( $(date +%s) - start ))
o=$out/mutants.out
count() { if [ -f "$o/$1.txt" ]; then wc -l <"$o/$1.txt"; else echo 0; fi; }
echo "mutants.sh: $crate ${*:-(whole crate)}: $(count caught) caught, $(count missed) missed," \
    "$(count unviable) unviable, $(count timeout) timeout in ${secs}s (exit $rc; 2: some missed," \
    "3: timeouts, 124/130: budget reached)"
if [ -s "$o/missed.txt" ]; then
    echo "missed:"
    cat "$o/missed.txt"
fi
exit "$rc"
