#!/usr/bin/env bash
# Profiles this process (not the ZooKeeper JVM) while a workload of the recipe benchmark runs:
#   benches/recipes/profile.sh W1 "round 2" 6
# builds the benchmark with line tables, starts the workload, waits until its stderr shows the
# given marker, attaches `perf record -g` to the benchmark's process for the given seconds, and
# prints the top symbols by self time. Needs `perf` (Debian: linux-perf).
set -euo pipefail
cd "$(dirname "$0")/../.."
workload=${1:-W1}
marker=${2:-round 2}
seconds=${3:-6}
out=$(mktemp -d)
CARGO_PROFILE_BENCH_DEBUG=line-tables-only cargo bench --features testkit --bench recipes --no-run \
    2>"$out/build.log"
bin=$(grep -o 'target/release/deps/recipes-[0-9a-f]*' "$out/build.log" | tail -1)
"$bin" "$workload" >"$out/lines.json" 2>"$out/progress.log" &
pid=$!
until grep -q "$marker" "$out/progress.log"; do
    kill -0 "$pid" 2>/dev/null || { echo "the workload ended before \"$marker\"" >&2; exit 1; }
    sleep 0.2
done
perf record ${PERF_RECORD_FLAGS:-} -F 2999 -g -p "$pid" -o "$out/perf.data" -- sleep "$seconds" >/dev/null 2>&1
wait "$pid"
cat "$out/lines.json"
perf report -i "$out/perf.data" --no-children --sort comm,symbol --stdio 2>/dev/null \
    | grep -v '^#' | grep '%' | head -60
echo "perf data and logs: $out"
