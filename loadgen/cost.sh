#!/usr/bin/env bash
# loadgen's own cost, before/after a loadgen change (issue 21 §4): two
# loadgen binaries in turn (A, B, A, B, ...) against the same `tessera`, a
# fresh server process each run, the server's shard pinned to CPU 0 and
# loadgen one thread on CPU 1 (taskset), one line per run with loadgen's CPU
# per bot-second (`loadgen_cpu_us_per_bot_s` of its JSON) and per 100
# updates received (what a bot costs depends on what the server sends it).
#
#   git worktree add --detach /tmp/base <commit>
#   (cd /tmp/base && CARGO_TARGET_DIR=/tmp/base-target cargo build --release --bin loadgen)
#   cargo build --release --bin loadgen --bin tessera
#   bash loadgen/cost.sh /tmp/base-target/release/loadgen target/release/loadgen
#
# BOTS (2000), ROUNDS (2), DURATION (15s), TESSERA (target/release/tessera),
# EXTRA (loadgen flags, e.g. "--check-fraction 0.1"), SETS (config
# overrides for both the server and loadgen, e.g. "--set
# view.client_update_hz=20.0"). A loadgen may carry flags of its own, e.g.
# B="target/release/loadgen --io epoll". Reports in $OUT (target/cost).
# Opt-in; not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: cost.sh LOADGEN_A LOADGEN_B}
B=${2:?usage: cost.sh LOADGEN_A LOADGEN_B}
BOTS=${BOTS:-2000}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-15s}
TESSERA=${TESSERA:-target/release/tessera}
EXTRA=${EXTRA:-}
SETS=${SETS:-}
OUT=${OUT:-target/cost}
mkdir -p "$OUT"
fixed="--set balance.enabled=false $SETS"
# shellcheck disable=SC2086
sets=$($A --bots "$BOTS" $fixed --print-server-sets)
port=7470
for round in $(seq "$ROUNDS"); do
  for which in A B; do
    lg=$A
    [ "$which" = B ] && lg=$B
    port=$((port + 1))
    name="${which}_b${BOTS}_r${round}"
    eval "exec $TESSERA $sets $fixed --set runtime.shards=1 --set 'runtime.cpus=[0]' \
      --listen 127.0.0.1:$port --admin 127.0.0.1:$((port + 1000))" >"$OUT/$name.server.log" 2>&1 &
    pid=$!
    sleep 1.5
    eval "taskset -c 1 $lg --bots $BOTS --threads 1 --no-pin --duration $DURATION --ramp 5s \
      --server 127.0.0.1:$port --server-admin 127.0.0.1:$((port + 1000)) --server-pid $pid \
      $sets $fixed $EXTRA --json $OUT/$name.json" >"$OUT/$name.log" 2>&1 || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || true
    python3 - "$OUT/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
us, upd = r.get("loadgen_cpu_us_per_bot_s") or 0.0, r["updates_per_bot_per_s"]
cpu, u = r.get("cpu_pct") or {}, r["update_latency_ms"]
print(f"{sys.argv[2]:<14} loadgen {us:6.1f} us/bot-s {100 * us / max(upd, 1e-9):6.1f} us/100 updates  "
      f"updates/bot/s {upd:6.1f}  moves/bot/s {r['per_bot_per_s']['moves']:5.2f}  "
      f"update p50 {u['p50']:6.1f} p99 {u['p99']:6.1f} ms  "
      f"server CPU {cpu.get('server', 0):5.1f} %  loadgen CPU {cpu.get('loadgen', 0):5.1f} %  "
      f"checked {r.get('bots_checked')}  violations {r['violations']}  io {r.get('io', 'epoll')}")
PY
  done
done
