#!/usr/bin/env bash
# What the master costs in memory, per feature, at rest and in use, against an earlier binary.
#
# Every case runs `drover run --workers 4 --prefetch 8 --spawn fork` (no-op jobs through
# php-client/bin/drover-worker) and samples the master's /proc/PID/smaps_rollup every 50 ms:
#   rest  — the queue empty, the master up for REST_SECS (--max-time) with the feature configured;
#   drain — JOBS jobs queued first, then `--stop-when-empty` (the feature in use where it can be).
# Printed per case, the median over RUNS of the master's peak PSS and, at that sample, its
# anonymous and file-backed parts (KiB); and each binary's size. The binaries alternate within a
# run, the cases rotate, each binary has its own database migrated by itself (so the old schema
# counts for the old binary), with a VACUUM ANALYZE before each drain.
#
# The cases (the old binary runs those it has; an unknown flag or key is reported as n/a):
#   plain     no feature;
#   schedule  50 tasks (10 of them every second, the rest each minute; UTC, Paris, New York),
#             runs that print a succeeded outcome;
#   limits    every job under a concurrency limit of 16 (one key) — admission in use;
#   fair      the queue fair, jobs spread over 20 keys;
#   budgets   a fleet budget of 16 on the queue;
#   metrics   the /metrics listener, scraped every 500 ms;
#   laravel   what config/drover.php writes by default (a worker memory limit of 128 MiB checked
#             every 5 s, a long-wait alert at 60 s on the queue), with the bench's log level
#             (`info,drover::master=debug`, as bench/src/engines.rs starts drover).
#
# Build the old binary in a worktree, e.g.
#   git worktree add /tmp/old 019efd3 && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p drover-cli)
# Usage: bench/master-memory.sh OLD_BINARY NEW_BINARY [JOBS=20000] [RUNS=3] [CASES="plain schedule limits fair budgets metrics"]
set -euo pipefail
OLD=$1 NEW=$2 JOBS=${3:-20000} RUNS=${4:-3} CASES=${5:-plain schedule limits fair budgets metrics laravel}
REST_SECS=${REST_SECS:-4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PGBIN=/usr/lib/postgresql/15/bin
W=$(mktemp -d /tmp/drover-mem.XXXX); chmod 755 "$W"; mkdir "$W/pg"; chown postgres "$W/pg"; chmod 700 "$W/pg"
trap 'runuser -u postgres -- $PGBIN/pg_ctl -D "$W/pg" -m fast stop >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
runuser -u postgres -- $PGBIN/initdb -D "$W/pg" -A trust -U drover >/dev/null
runuser -u postgres -- $PGBIN/pg_ctl -D "$W/pg" -o "-k $W/pg -c listen_addresses=''" -l "$W/pg/server.log" start >/dev/null
for which in old new; do
  bin=$OLD; [ $which = new ] && bin=$NEW
  psql -h "$W/pg" -U drover -d postgres -qc "CREATE DATABASE drover_$which"
  "$bin" migrate --database-url "host=$W/pg port=5432 user=drover dbname=drover_$which" >/dev/null 2>&1
done
PORT=$((20000 + RANDOM % 20000))

echo '<?php return static function ($job): void {};' > "$W/noop.php"
# Fills the queue in the way a case needs: plain, limited (one concurrency key of 16) or fair (20 keys).
cat > "$W/fill.php" <<'PHP'
<?php
require $argv[1];
$pdo = new PDO($argv[2], null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
$p = new Drover\Producer($pdo);
$n = (int) $argv[3];
$pdo->beginTransaction();
switch ($argv[4]) {
    case 'limits':
        for ($i = 0; $i < $n; $i++) { $p->enqueueLimited('{}', [new Drover\Middleware\LimitConcurrency('bench', 16)]); }
        break;
    case 'fair':
        for ($i = 0; $i < $n; $i++) { $p->enqueueFair('{}', 'tenant-' . ($i % 20)); }
        break;
    default:
        for ($i = 0; $i < $n; $i += 1000) { $p->enqueueMany(array_fill(0, min(1000, $n - $i), '{}')); }
}
$pdo->commit();
PHP
# The schedule's export: 50 tasks.
{
  printf '{"drover_schedule":1,"tasks":['
  for i in $(seq 0 49); do
    zone=UTC; [ $((i % 3)) = 1 ] && zone=Europe/Paris; [ $((i % 3)) = 2 ] && zone=America/New_York
    repeat=null; [ "$i" -lt 10 ] && repeat=1
    [ "$i" -gt 0 ] && printf ','
    printf '{"key":"bench/task-%d","index":%d,"summary":"task %d","expression":"* * * * *","timezone":"%s","repeat_seconds":%s}' "$i" "$i" "$i" "$zone" "$repeat"
  done
  printf ']}\n'
} > "$W/schedule.json"
echo 'echo "{\"drover_schedule_run\":1,\"outcome\":\"succeeded\"}"' > "$W/run-task.sh"

# The configuration file of a case (a config file, so the old binary refuses keys it lacks).
config() { # case db
  local extra='' pool=''
  case $1 in
    schedule) extra=",\"schedule\":{\"export_command\":[\"cat\",\"$W/schedule.json\"],\"run_command\":[\"sh\",\"$W/run-task.sh\"]}" ;;
    fair) extra=',"fair_queues":["default"]' ;;
    budgets) extra=',"queue_budgets":{"default":16}' ;;
    metrics) extra=",\"metrics_listen\":\"127.0.0.1:$PORT\"" ;;
    laravel) extra=',"long_waits":{"thresholds":{"default":60},"cooldown":300}' pool=',"memory":128,"timeout":60' ;;
  esac
  cat <<JSON
{"version":1,"database_url":"host=$W/pg port=5432 user=drover dbname=$2","state_dir":"$W/state","pools":[{"name":"default","queues":["default"],"processes":4,"prefetch":8,"spawn":"fork","command":["php","$ROOT/php-client/bin/drover-worker","$W/noop.php"]$pool}]$extra}
JSON
}

# Runs the master until it exits, sampling it; prints "peak_pss anon file" (KiB) or "n/a".
measure() { # binary config_file mode
  local bin=$1 cfg=$2 mode=$3 args
  if [ "$mode" = rest ]; then args=(--max-time "$REST_SECS"); else args=(--stop-when-empty); fi
  # HOT_CODE_DIR (bench/hot-code.sh): the master runs under callgrind, which records the
  # functions it runs in one file per case, mode and process (the lease guard's too).
  local wrap=()
  [ -n "${HOT_CODE_DIR:-}" ] && wrap=(valgrind -q --tool=callgrind --demangle=no --trace-children=yes
    "--trace-children-skip=*php*,*/sh,*/cat,*/curl" "--callgrind-out-file=$HOT_CODE_DIR/$CASE.$mode.%p")
  local log=info; [ "$CASE" = laravel ] && log=info,drover::master=debug
  DROVER_LOG=$log "${wrap[@]}" "$bin" run --config "$cfg" "${args[@]}" >"$W/m.log" 2>&1 &
  local pid=$! peak=0 anon=0 file=0 p a f k v scraper=''
  if grep -q metrics_listen "$cfg"; then
    (while kill -0 $pid 2>/dev/null; do curl -s "http://127.0.0.1:$PORT/metrics" >/dev/null || true; sleep 0.5; done) &
    scraper=$!
  fi
  while [ -r /proc/$pid/smaps_rollup ]; do
    p=0 a=0 f=0
    while read -r k v _; do
      case $k in Pss:) p=$v ;; Pss_Anon:) a=$v ;; Pss_File:) f=$v ;; esac
    done 2>/dev/null < /proc/$pid/smaps_rollup || true  # (stderr first: the master may end between the test and the read)
    if [ "$p" -gt "$peak" ]; then peak=$p anon=$a file=$f; fi
    sleep 0.05
  done
  local rc=0; wait $pid || rc=$?
  [ -n "$scraper" ] && { kill $scraper 2>/dev/null || true; wait $scraper 2>/dev/null || true; }
  if [ $rc != 0 ]; then
    if grep -qiE 'unknown field|unexpected argument' "$W/m.log"; then echo n/a; return; fi
    cat "$W/m.log" >&2; exit 1
  fi
  echo "$peak $anon $file"
}

median() { sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "n/a"}'; }
declare -A R
round=0
for run in $(seq "$RUNS"); do
  for c in $CASES; do
    for mode in rest drain; do
      round=$((round + 1))
      order="old new"; [ $((round % 2)) = 0 ] && order="new old"
      [ -n "${HOT_CODE_DIR:-}" ] && order=new
      for which in $order; do
        bin=$OLD; [ $which = new ] && bin=$NEW
        db=drover_$which
        config "$c" "$db" > "$W/$which.json"
        filled=yes
        if [ "$mode" = drain ]; then
          # The old schema may lack what a case enqueues with (limits, fair keys): n/a there.
          php "$W/fill.php" "$ROOT/php-client/autoload.php" "pgsql:host=$W/pg;port=5432;dbname=$db;user=drover" "$JOBS" "$c" >"$W/fill.err" 2>&1 || filled=no
          [ $filled = no ] && [ $which = new ] && { cat "$W/fill.err" >&2; exit 1; }
          psql -h "$W/pg" -U drover -d "$db" -qc 'VACUUM ANALYZE drover.jobs' >/dev/null
        fi
        if [ $filled = yes ]; then
          R[$which.$c.$mode]+="$(CASE=$c measure "$bin" "$W/$which.json" "$mode" | tr ' ' ,);"
        else
          R[$which.$c.$mode]+="n/a;"
        fi
        # Nothing left for the next case (the old schema has no limit tables: errors ignored).
        psql -h "$W/pg" -U drover -d "$db" -qc 'DELETE FROM drover.jobs' >/dev/null 2>&1 || true
        psql -h "$W/pg" -U drover -d "$db" -qc 'DELETE FROM drover.limit_waiting' >/dev/null 2>&1 || true
      done
    done
  done
done

col() { # key field(1 pss, 2 anon, 3 file)
  tr ';' '\n' <<<"${R[$1]:-}" | awk -F, -v f="$2" 'NF == 3 {print $f}' | median
}
printf 'binary sizes: old %s bytes (%s), new %s bytes (%s)\n' "$(stat -c %s "$OLD")" "$OLD" "$(stat -c %s "$NEW")" "$NEW"
printf 'JOBS=%s RUNS=%s REST_SECS=%s; master peak PSS / its Pss_Anon / its Pss_File, KiB, median\n' "$JOBS" "$RUNS" "$REST_SECS"
printf '%-9s %-5s | %-20s | %-20s | %s\n' case mode old new 'new - old (PSS)'
for c in $CASES; do
  for mode in rest drain; do
    o="$(col old.$c.$mode 1) / $(col old.$c.$mode 2) / $(col old.$c.$mode 3)"
    n="$(col new.$c.$mode 1) / $(col new.$c.$mode 2) / $(col new.$c.$mode 3)"
    d=n/a; op=$(col old.$c.$mode 1); np=$(col new.$c.$mode 1)
    [ "$op" != n/a ] && [ "$np" != n/a ] && d=$((np - op))
    printf '%-9s %-5s | %-20s | %-20s | %s\n' "$c" "$mode" "$o" "$n" "$d"
  done
done
