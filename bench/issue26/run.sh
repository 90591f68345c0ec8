#!/usr/bin/env bash
# bench/issue26/run.sh — every figure of issue 26, REPEAT times, on one
# build of the CLI, one run at a time. Then `go run ./bench/issue26 OUT`
# prints the medians and ratios that bench/README reports.
#
#   bench/issue26/run.sh [OUT]        (default OUT: /tmp/issue26)
#
# Environment: REPEAT (default 3); ONLY, a regular expression on the run
# names (y- yardstick, sh- shards, sc- scale, dlq- artifact) to run a part.
# Work directories go to /tmp (the disk) and /dev/shm (tmpfs) and are
# removed after each run. Takes about an hour on 2 vCPUs.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/issue26}
repeat=${REPEAT:-3}
only=${ONLY:-.}
mkdir -p "$out/bin"
go build -o "$out/bin/action" ./cmd/action
for b in engine shards scale dlq; do go build -o "$out/bin/bench-$b" "./bench/$b"; done
git rev-parse HEAD > "$out/commit"
nproc > "$out/cpus"
cli=$out/bin/action
log() { echo "$(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) $*" >> "$out/progress.log"; }
run() { # name cmd...
	local name=$1 rc=0
	shift
	[[ $name =~ $only ]] || return 0
	log "start $name"
	"$@" > "$out/$name.json" 2> "$out/$name.err" || rc=$?
	log "end $name rc=$rc"
}
work() { rm -rf /tmp/issue26-work /dev/shm/issue26-work; mkdir -p /tmp/issue26-work /dev/shm/issue26-work; }
trap 'rm -rf /tmp/issue26-work /dev/shm/issue26-work' EXIT
engine() { "$out/bin/bench-engine" -action "$cli" -json -max-parallel 2 -before=false -n 300 -split -checkout "$@"; }
# Item 3: the yardstick, on the disk and on tmpfs, at 1,000 and 10,000
# files, the strong script beside the engine (-plain=false: not the
# plain-git baseline, a checkout per item).
for r in $(seq "$repeat"); do
	work; run "y-1k-disk-$r" engine -files 1000 -size-mb 4 -plain=false -dir /tmp/issue26-work/y
	work; run "y-1k-tmpfs-$r" engine -files 1000 -size-mb 4 -plain=false -dir /dev/shm/issue26-work/y
	work; run "y-10k-disk-$r" engine -files 10000 -size-mb 40 -plain=false -dir /tmp/issue26-work/y
	work; run "y-10k-tmpfs-$r" engine -files 10000 -size-mb 40 -plain=false -dir /dev/shm/issue26-work/y
done
# Item 4: gather, one shard of 200 items and 50 of 200.
for r in $(seq "$repeat"); do
	work; run "sh-1x200-$r" "$out/bin/bench-shards" -action "$cli" -json -n 200 -shards 1 -dir /tmp/issue26-work/s
	work; run "sh-50x200-$r" "$out/bin/bench-shards" -action "$cli" -json -n 10000 -shards 50 -dir /tmp/issue26-work/s
done
# Items 1 and 5: the million-item no-op job (its first item, status
# --json, peak RSS) and its resume; then items that commit, at 1,000,
# 10,000, 100,000 (windowed) and 1,000 again (the ratios are over the mean
# of the two 1,000-item runs: the first of an invocation runs cold).
for r in $(seq "$repeat"); do
	work; run "sc-1m-$r" "$out/bin/bench-scale" -action "$cli" -json -n 1000000 -window 30s -resume 10s -dir /tmp/issue26-work/c
done
for r in $(seq "$repeat"); do
	work; run "sc-commits-$r" "$out/bin/bench-scale" -action "$cli" -json -commits 100 -files 1000 -max-parallel 2 -n 1000,10000,100000,1000 -window 90s -dir /tmp/issue26-work/c
done
# Item 2: the DLQ artifact of 1,000,000 records against a cat of them.
for r in $(seq "$repeat"); do
	work; run "dlq-1m-$r" "$out/bin/bench-dlq" -bin "$cli" -json -n 1000000 -adds 10 -retry=false -only artifact
done
log "done"
