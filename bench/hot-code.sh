#!/usr/bin/env bash
# Rewrites link/hot-code.order, the order lld lays the release binary's functions out in
# (build.rs): the functions a master runs, recorded under callgrind, in tiers —
#   1. serving: start-up (flags and a config file), the claim loop, settling, the lease guard,
#      a stop — what every master runs;
#   2. the Laravel package's own launch (`php artisan drover` in the fixture app, as the demo and
#      the bench start it), what config/drover.php turns on by default (worker memory limits, long-wait alerts), the
#      bench's debug log of the master, and what a master does over its first minute and a half
#      with jobs trickling in (woken by NOTIFY, per-minute metrics, lease renewals, the minute's
#      duties) while `drover status` (text and JSON, as the bench waits for workers with it) asks;
#   3. then each feature's own functions, in this order: metrics listener, budgets, fair queues,
#      limits, schedule — each only what the tiers before it did not list.
# Within a tier, the order the functions first ran in. Functions no run reached follow in the
# compiler's order. Run it after a change of the version, a dependency or the toolchain (their
# names carry a hash of them; scripts/package says when too few names still match), then rebuild.
# Needs valgrind (installed here if missing). Usage: bench/hot-code.sh [JOBS=3000]
set -euo pipefail
JOBS=${1:-3000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
command -v valgrind >/dev/null || apt-get install -y -qq --no-install-recommends valgrind >/dev/null
cargo build --release -p drover-cli --quiet
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/drover
OUT=$(mktemp -d /tmp/drover-hot.XXXX); chmod 755 "$OUT"
trap 'rm -rf "$OUT"' EXIT

# The feature cases through the memory bench's own set-up, each a rest and a drain.
HOT_CODE_DIR=$OUT bash bench/master-memory.sh "$BIN" "$BIN" "$JOBS" 1 "plain laravel metrics budgets fair limits schedule" >/dev/null

# Start-up from flags rather than a config file, then a drain: also tier 1.
W=$OUT/flags; mkdir -p "$W/pg"; chown postgres "$W/pg"; chmod 700 "$W/pg"
PGBIN=/usr/lib/postgresql/15/bin
runuser -u postgres -- $PGBIN/initdb -D "$W/pg" -A trust -U drover >/dev/null
runuser -u postgres -- $PGBIN/pg_ctl -D "$W/pg" -o "-k $W/pg -c listen_addresses=''" -l "$W/pg/server.log" start >/dev/null
stop_pg() { runuser -u postgres -- $PGBIN/pg_ctl -D "$W/pg" -m fast stop >/dev/null 2>&1 || true; }
trap 'stop_pg; rm -rf "$OUT"' EXIT
URL="host=$W/pg port=5432 user=drover dbname=postgres"
"$BIN" migrate --database-url "$URL" >/dev/null 2>&1
echo '<?php return static function ($job): void {};' > "$W/noop.php"
php -r 'require $argv[1]; $p = new Drover\Producer(new PDO($argv[2])); $p->enqueueMany(array_fill(0, (int) $argv[3], "{}"));' \
  "$ROOT/php-client/autoload.php" "pgsql:host=$W/pg;port=5432;dbname=postgres;user=drover" "$JOBS"
valgrind -q --tool=callgrind --demangle=no --trace-children=yes "--trace-children-skip=*php*" \
  "--callgrind-out-file=$OUT/plain.flags.%p" \
  "$BIN" run --database-url "$URL" --state-dir "$W/state" --workers 4 --prefetch 8 --spawn fork --stop-when-empty \
  -- php "$ROOT/php-client/bin/drover-worker" "$W/noop.php" >"$W/m.log" 2>&1 || { cat "$W/m.log"; exit 1; }
# A minute and a half with the package's defaults: the backlog, then 20 jobs a second.
cat > "$W/long.json" <<JSON
{"version":1,"database_url":"$URL","state_dir":"$W/state","long_waits":{"thresholds":{"default":60},"cooldown":300},"pools":[{"name":"default","queues":["default"],"processes":4,"prefetch":8,"spawn":"fork","memory":128,"timeout":60,"command":["php","$ROOT/php-client/bin/drover-worker","$W/noop.php"]}]}
JSON
php -r 'require $argv[1]; $p = new Drover\Producer(new PDO($argv[2])); $p->enqueueMany(array_fill(0, (int) $argv[3], "{}"));' \
  "$ROOT/php-client/autoload.php" "pgsql:host=$W/pg;port=5432;dbname=postgres;user=drover" "$JOBS"
php -r 'require $argv[1]; $p = new Drover\Producer(new PDO($argv[2])); for ($i = 0; $i < 1800; $i++) { $p->enqueue("{}"); usleep(50000); }' \
  "$ROOT/php-client/autoload.php" "pgsql:host=$W/pg;port=5432;dbname=postgres;user=drover" &
trickle=$!
(sleep 1; for i in $(seq 40); do
  "$BIN" status --json --state-dir "$W/state" >/dev/null 2>&1 || true
  "$BIN" status --state-dir "$W/state" >/dev/null 2>&1 || true
  sleep 0.5
done) &
asking=$!
DROVER_LOG=info,drover::master=debug valgrind -q --tool=callgrind --demangle=no --trace-children=yes "--trace-children-skip=*php*" \
  "--callgrind-out-file=$OUT/long.run.%p" "$BIN" run --config "$W/long.json" --max-time 90 >"$W/long.log" 2>&1 \
  || { cat "$W/long.log"; exit 1; }
kill $trickle $asking 2>/dev/null || true
stop_pg

# The package's own launch, as scripts/demo and the bench start drover: `php artisan drover` in
# the fixture app (tests/laravel-app), the configuration Laravel exports, Laravel workers forked
# from a zygote, the embedded PostgreSQL, jobs dispatched through the queue driver. php execs
# DROVER_BINARY: here a wrapper that runs the binary under callgrind.
A=$OUT/artisan; mkdir -p "$A/storage/framework/cache/data" "$A/storage/logs" "$A/storage/bootstrap"; chmod 755 "$A"
cat > "$A/drover-under-callgrind" <<SH
#!/bin/sh
exec valgrind -q --tool=callgrind --demangle=no --trace-children=yes \
  "--trace-children-skip=*php*,*postgres*,*initdb*,*pg_ctl*,*runuser*,*/sh,*/cat" \
  "--callgrind-out-file=$OUT/artisan.run.%p" "$BIN" "\$@"
SH
chmod 755 "$A/drover-under-callgrind"
(
  export DROVER_EMBEDDED=1 DROVER_STATE_DIR="$A" DROVER_BINARY="$A/drover-under-callgrind"
  export DROVER_PROCESSES=4 DROVER_PREFETCH_JOBS=4 DROVER_QUEUES=default
  export DB_HOST="$A/postgres" DB_PORT=5432 DB_DATABASE=drover DB_USERNAME=drover
  export APP_STORAGE="$A/storage" APP_SERVICES_CACHE="$A/storage/bootstrap/services.php" APP_PACKAGES_CACHE="$A/storage/bootstrap/packages.php"
  export LOG_CHANNEL=stderr LOG_LEVEL=error
  unset DATABASE_URL
  artisan() { php "$ROOT/tests/laravel-app/artisan" "$@"; }
  artisan drover 2>"$A/drover.log" &
  master=$!
  for _ in $(seq 1200); do [ -f "$A/master.json" ] && break; sleep 0.1; done
  [ -f "$A/master.json" ] || { echo "hot-code: php artisan drover did not start; its log:"; cat "$A/drover.log"; exit 1; }
  artisan migrate --force >/dev/null
  artisan demo:dispatch "$JOBS" 1 >/dev/null
  for _ in $(seq 1200); do
    left=$(psql "host=$A/postgres port=5432 user=drover dbname=drover" -XtAqc "SELECT count(*) FROM drover.jobs")
    [ "$left" = 0 ] && break
    "$BIN" status --state-dir "$A" >/dev/null 2>&1 || true
    sleep 0.5
  done
  artisan drover:terminate >/dev/null
  wait $master || { echo "hot-code: php artisan drover did not stop cleanly; its log:"; cat "$A/drover.log"; exit 1; }
)

nm "$BIN" | awk '$2 ~ /^[tTwW]$/ {print $3}' > "$OUT/symbols"
python3 - "$OUT" "$ROOT/link/hot-code.order" <<'PY'
import glob, os, re, sys
out, order_path = sys.argv[1], sys.argv[2]
symbols = set(open(os.path.join(out, 'symbols')).read().split())
name = re.compile(r'^c?fn=\(\d+\) (.*)$')
def functions(case):
    seen, listed = set(), []
    # Each process's file in the order it started (its pid).
    for path in sorted(glob.glob(os.path.join(out, case + '.*')), key=lambda p: (p.split('.')[-2], int(p.split('.')[-1]))):
        for line in open(path, errors='replace'):
            m = name.match(line.rstrip('\n'))
            if m and m.group(1) in symbols and m.group(1) not in seen:
                seen.add(m.group(1)); listed.append(m.group(1))
    return listed
order, listed = [], set()
tiers = [('serving', ['plain']), ('the package: its launch, its defaults, a minute', ['artisan', 'laravel', 'long']), ('metrics', ['metrics']), ('budgets', ['budgets']), ('fair', ['fair']),
         ('limits', ['limits']), ('schedule', ['schedule'])]
for tier, cases in tiers:
    new = [f for c in cases for f in functions(c) if f not in listed]
    new = list(dict.fromkeys(new))
    listed.update(new); order += new
    print(f'{tier}: {len(new)} functions')
open(order_path, 'w').write('\n'.join(order) + '\n')
print(f'{len(order)} functions written to {order_path}')
PY
