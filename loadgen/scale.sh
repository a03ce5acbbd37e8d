#!/usr/bin/env bash
# The scale table of loadgen/README.md: random walk (auto world for ~60 in
# view, 10 moves per second) at several bot counts, the server on 1 and on
# 2 shards, one JSON report per run, then one markdown row per run.
#
#   bash loadgen/scale.sh                      # 1000 2000 5000 10000 bots
#   BOTS="1000 2000" SHARDS="2" DURATION=20s bash loadgen/scale.sh
#
# The layout is fixed (balancing off: EXTRA, default
# "--set balance.enabled=false"), so "2 shards" means the start-up cells on
# 2 shards for the whole run; with the default thresholds a light load would
# merge them onto one. The server runs embedded, or as its own `tessera`
# process when one process may not open the files bots and server need
# (2 per bot: `ulimit -Hn`), or always with SEPARATE=1. Opt-in (about 6 minutes for the default
# matrix); not part of CI. Needs python3 for the table. Reports land in
# $OUT (default target/scale); the table goes to stdout. RUN=0 only prints
# the table of the reports already in $OUT. PIN=1: clients per core as
# issue 21 measures them: the server in its own process with every shard on
# CPU 0, loadgen one thread on CPU 1 (taskset), e.g.
#   PIN=1 SHARDS=1 BOTS="1000 2000 5000" bash loadgen/scale.sh
# (EXTRA="--set balance.enabled=false --check-fraction 0.1" for a sampled
# loadgen; add "--set view.client_update_hz=20.0" for 20 Hz client updates,
# the default being 10).
set -euo pipefail
cd "$(dirname "$0")/.."
BOTS=${BOTS:-"1000 2000 5000 10000"}
SHARDS=${SHARDS:-"1 2"}
DURATION=${DURATION:-20s}
OUT=${OUT:-target/scale}
EXTRA=${EXTRA:-"--set balance.enabled=false"}
LISTEN=${LISTEN:-127.0.0.1:7411}
ADMIN=${ADMIN:-127.0.0.1:9411}
PIN=${PIN:-0}
LG_PIN=""
LG_THREADS=2
# The server takes the config sets only (loadgen flags such as
# --check-fraction in EXTRA are loadgen's).
SERVER_EXTRA=$(printf '%s\n' $EXTRA | awk '/^--set$/ {getline v; printf "--set %s ", v}')
if [ "$PIN" = 1 ]; then
  SERVER_EXTRA="$SERVER_EXTRA --set runtime.cpus=[0]"
  LG_PIN="taskset -c 1"
  LG_THREADS="1 --no-pin"
  SEPARATE=1
fi
mkdir -p "$OUT"
[ "${RUN:-1}" = 0 ] || cargo build --release --locked --bin loadgen --bin tessera >/dev/null
hard=$(ulimit -Hn)

# One run with the server in its own process: $1 bots, $2 shards, $3 ramp,
# $4 report name.
separate() {
  local sets pid
  # shellcheck disable=SC2086
  sets=$(./target/release/loadgen --bots "$1" $EXTRA --print-server-sets)
  eval "exec ./target/release/tessera $sets $SERVER_EXTRA --set runtime.shards=$2 \
    --listen $LISTEN --admin $ADMIN" >"$OUT/$4.server.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/${LISTEN%:*}/${LISTEN#*:}") 2>/dev/null && break
    sleep 0.1
  done
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "   tessera did not start: see $OUT/$4.server.log" >&2
    return 2
  fi
  local rc=0
  eval "$LG_PIN ./target/release/loadgen --bots $1 --threads $LG_THREADS --duration $DURATION --ramp $3 \
    --server $LISTEN --server-admin $ADMIN --server-pid $pid --shards $2 $sets $EXTRA \
    --json $OUT/$4.json" >"$OUT/$4.log" 2>&1 || rc=$?
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  return $rc
}

for bots in $BOTS; do
  [ "${RUN:-1}" = 0 ] && break
  for shards in $SHARDS; do
    ramp=5s
    [ "$bots" -ge 5000 ] && ramp=10s
    name="b${bots}_s${shards}"
    rc=0
    if [ "${SEPARATE:-0}" = 1 ] || { [ "$hard" != unlimited ] && [ $((bots * 2 + 256)) -gt "$hard" ]; }; then
      echo "== $bots bots, $shards shard(s), server in its own process" >&2
      separate "$bots" "$shards" "$ramp" "$name" || rc=$?
    else
      echo "== $bots bots, $shards shard(s)" >&2
      # shellcheck disable=SC2086
      ./target/release/loadgen --bots "$bots" --shards "$shards" --threads 2 \
        --duration "$DURATION" --ramp "$ramp" $EXTRA --json "$OUT/$name.json" \
        >"$OUT/$name.log" 2>&1 || rc=$?
    fi
    [ "$rc" = 0 ] || echo "   (exit $rc: see $OUT/$name.log)" >&2
  done
done
python3 - "$OUT" $BOTS -- $SHARDS <<'PY'
import json, sys, os
out = sys.argv[1]
rest = sys.argv[2:]
cut = rest.index("--")
bots, shards = rest[:cut], rest[cut + 1:]
print("| bots | shards | server | connected | update latency p50 / p99 / max (ms) | ack RTT p50 / p99 (ms) "
      "| moves sent /bot/s | updates /bot/s | bytes /bot/s | in view | migrations/s | violations | server CPU (% core) "
      "| loadgen CPU | server µs per client-s | tick p50/p99 per shard (ms) | stalls | disconnects |")
print("|" + "---|" * 18)
for b in bots:
    for s in shards:
        p = os.path.join(out, f"b{b}_s{s}.json")
        if not os.path.exists(p):
            print(f"| {b} | {s} | | (no report) |" + " |" * 14)
            continue
        r = json.load(open(p))
        u, a, srv = r["update_latency_ms"], r["ack_rtt_ms"], r["server"]
        c = srv.get("counters", {})
        m = srv.get("metrics", {})
        ticks = " / ".join(f"{p50 / 1000:.0f}/{p99 / 1000:.0f}"
                           for p50, p99 in zip(c.get("tick_p50_us", []), c.get("tick_p99_us", [])))
        stalls = c.get("stalls", m.get("tessera_shard_stalls_total", "n/a"))
        if isinstance(stalls, float):
            stalls = int(stalls)
        disc = {k: v for k, v in r["counters"].get("disconnect_reasons", {}).items() if k != "bye"}
        cpu = r.get("cpu_pct") or {}
        print(f"| {b} | {s} | {srv.get('source', '?')} | {r['bots_connected']} "
              f"| {u['p50']:.0f} / {u['p99']:.0f} / {u['max']:.0f} "
              f"| {a['p50']:.0f} / {a['p99']:.0f} | {r['per_bot_per_s']['moves']:.1f} "
              f"| {r['updates_per_bot_per_s']:.1f} "
              f"| {r['bytes_per_bot_per_s']:.0f} | {r['in_view_avg']:.0f} | {r['migrations_per_s']:.1f} "
              f"| {r['violations']} | {cpu.get('server', 0):.0f} | {cpu.get('loadgen', 0):.0f} "
              f"| {cpu.get('server', 0) * 1e4 / max(r['bots_connected'], 1):.0f} "
              f"| {ticks or 'n/a'} | {stalls} | {disc or 0} |")
PY
