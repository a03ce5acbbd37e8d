#!/usr/bin/env bash
# Before/after for a server change: the same loadgen against two `tessera`
# binaries in turn (A, B, A, B, ...), each a fresh process on its own port,
# so both see the same machine state and the same bots.
#
#   git worktree add /tmp/base <commit>
#   (cd /tmp/base && CARGO_TARGET_DIR=/tmp/base-target cargo build --release --bin tessera)
#   cargo build --release --bin tessera --bin loadgen   (right before: a `cargo test
#   --release` in between rebuilds tessera with the costly invariant checks; a run
#   on such a binary prints a WARNING)
#   bash loadgen/ab.sh /tmp/base-target/release/tessera target/release/tessera
#
# BOTS (1000), SHARDS ("2 1"), ROUNDS (2), DURATION (20s), EXTRA (fixed
# layout: "--set balance.enabled=false"; given to both sides), LG_EXTRA
# (loadgen's own options, e.g. "--check-fraction 0.1"). PIN=1: clients per core, the
# way issue 21 measures them: the server's shards all pinned to CPU 0,
# loadgen one thread on CPU 1 (taskset). One JSON report per run in $OUT
# (target/ab) and one line each. Opt-in; not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: ab.sh TESSERA_A TESSERA_B}
B=${2:?usage: ab.sh TESSERA_A TESSERA_B}
BOTS=${BOTS:-1000}
SHARDS=${SHARDS:-"2 1"}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-20s}
EXTRA=${EXTRA:-"--set balance.enabled=false"}
LG_EXTRA=${LG_EXTRA:-}
OUT=${OUT:-target/ab}
LG=./target/release/loadgen
PIN=${PIN:-0}
SERVER_PIN=""
LG_PIN=""
LG_THREADS=2
if [ "$PIN" = 1 ]; then
  SERVER_PIN="--set runtime.cpus=[0]"
  LG_PIN="taskset -c 1"
  LG_THREADS="1 --no-pin"
fi
mkdir -p "$OUT"
port=7430
for shards in $SHARDS; do
  # shellcheck disable=SC2086
  sets=$($LG --bots "$BOTS" $EXTRA --print-server-sets)
  for round in $(seq "$ROUNDS"); do
    for which in A B; do
      bin=$A
      [ "$which" = B ] && bin=$B
      port=$((port + 1))
      name="${which}_s${shards}_r${round}"
      eval "exec $bin $sets $EXTRA $SERVER_PIN --set runtime.shards=$shards \
        --listen 127.0.0.1:$port --admin 127.0.0.1:$((port + 1000))" >"$OUT/$name.server.log" 2>&1 &
      pid=$!
      sleep 1
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "$name: the server did not start (see $OUT/$name.server.log)" >&2
        continue
      fi
      eval "$LG_PIN $LG --bots $BOTS --threads $LG_THREADS --duration $DURATION --ramp 5s \
        --server 127.0.0.1:$port --server-admin 127.0.0.1:$((port + 1000)) \
        --server-pid $pid --shards $shards $sets $EXTRA $LG_EXTRA --json $OUT/$name.json" >"$OUT/$name.log" 2>&1 || true
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" || true
      # A `cargo test --release` leaves target/release/tessera built with the
      # costly invariant checks (ticks about 40 % longer at 10,000 bots).
      if grep -q "costly invariant checks" "$OUT/$name.server.log"; then
        echo "$name: WARNING: $bin is a test build with the invariant checks on: its figures are not comparable" >&2
      fi
      python3 - "$OUT/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
u, a, cpu = r["update_latency_ms"], r["ack_rtt_ms"], r.get("cpu_pct") or {}
t = r.get("hottest_shard_tick") or {}
print(f"{sys.argv[2]:<10} update p50 {u['p50']:6.1f} p99 {u['p99']:6.1f}  ack p50 {a['p50']:6.1f} "
      f"p99 {a['p99']:6.1f} ms  updates/bot/s {r['updates_per_bot_per_s']:6.1f}  "
      f"server CPU {cpu.get('server', 0):5.1f} %  loadgen CPU {cpu.get('loadgen', 0):5.1f} %  "
      f"connected {r.get('bots_connected', '?')}  violations {r['violations']}  "
      f"seconds over tick budget {t.get('seconds_over_budget', '?')}/{t.get('seconds', '?')}")
PY
    done
  done
done
