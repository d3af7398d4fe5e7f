#!/usr/bin/env bash
# Starts a local Weir cluster (one JobManager, two TaskManagers, as separate
# processes), submits examples/running-sum.yaml and shows checkpoints
# completing and output growing until the job finishes. Ctrl-C stops
# everything cleanly at any time.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
WORK=${WEIR_DEMO_DIR:-${TMPDIR:-/tmp}/weir-demo}
OUT=/tmp/weir-out   # the example job's file-sink path
JM=127.0.0.1:6123
weir() { "$BIN/weir" --jobmanager "$JM" "$@"; }

rm -rf "$WORK" "$OUT"
mkdir -p "$WORK"
pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "== stopping the cluster (SIGTERM)"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "   logs are in $WORK"
}
trap stop EXIT
trap 'exit 130' INT TERM

echo "== starting a JobManager and two TaskManagers (logs in $WORK)"
"$BIN/jobmanager" --rpc-addr "$JM" --http-addr 127.0.0.1:8081 --checkpoint-dir "$WORK/checkpoints" >"$WORK/jobmanager.log" 2>&1 &
pids+=($!)
for i in 1 2; do
  "$BIN/taskmanager" --jobmanager "$JM" --rpc-addr "127.0.0.1:$((6123 + i))" --http-addr "127.0.0.1:$((9248 + i))" \
    --id "taskmanager-$i" >"$WORK/taskmanager-$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  n=$(weir taskmanager list -o json 2>/dev/null | grep -o '"id"' | wc -l || true)
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
weir taskmanager list

echo
echo "== submitting examples/running-sum.yaml"
JOB=$(weir job submit -f examples/running-sum.yaml)
echo "   job $JOB"

state=""
while :; do
  sleep 2
  state=$(weir job get "$JOB" -o json | sed -n 's/.*"state": *"\([A-Z]*\)".*/\1/p' | head -1)
  lines=$(cat "$OUT"/part-* 2>/dev/null | wc -l || true)
  echo
  echo "== $(date +%T)  job $state, committed output: $lines of 100000 records"
  weir checkpoint list "$JOB" | sed -n 1,9p
  case "$state" in FINISHED|FAILED|CANCELED) break ;; esac
done

echo
weir job get "$JOB"
echo
echo "== committed output in $OUT: $(cat "$OUT"/part-* | wc -l) records in $(ls "$OUT" | wc -l) files; final sum per key:"
cat "$OUT"/part-* | awk -F, '$2 > max[$1] { max[$1] = $2 } END { for (k in max) printf "   key %2d: %d\n", k, max[k] }' | sort -n -k2
[ "$state" = FINISHED ]
