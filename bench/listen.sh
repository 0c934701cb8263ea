#!/usr/bin/env bash
# The dev loop, measured: JOBS no-op jobs queued, then drained by `php artisan queue:listen
# --tries=1` on a drover connection (a fresh worker per job, code watch on) and by Laravel's own
# `queue:listen database --tries=1 --sleep=0` (a `queue:work --once` process per job), on the
# Laravel 12 fixture app, one private PostgreSQL for both. Prints jobs/s for each.
# Usage: bench/listen.sh [JOBS=50]   (needs target/release/drover and target/laravel12-app)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${1:-50}
APP=$ROOT/target/laravel12-app
[ -x target/release/drover ] && [ -f "$APP/artisan" ] || { echo "listen.sh: build first: cargo build --release, and tests/laravel12-app/build" >&2; exit 1; }
W=$(mktemp -d /tmp/drover-listen.XXXX)
chmod 755 "$W"
trap '[ -n "${KEEP:-}" ] && cp -r "$W"/*.log /tmp/ 2>/dev/null; runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -m fast stop >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
chown postgres "$W"
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$W/pg" -A trust -U drover >/dev/null
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -o "-k $W -c listen_addresses=''" -l "$W/pg.log" start >/dev/null
psql -h "$W" -U drover -d postgres -qc 'CREATE DATABASE drover' >/dev/null
mkdir -p "$W/storage/framework/cache/data" "$W/storage/framework/views" "$W/storage/logs" "$W/storage/bootstrap"
export DB_HOST=$W DB_PORT=5432 DB_DATABASE=drover DB_USERNAME=drover APP_STORAGE=$W/storage
export APP_SERVICES_CACHE=$W/storage/bootstrap/services.php APP_PACKAGES_CACHE=$W/storage/bootstrap/packages.php
export DROVER_BINARY=$ROOT/target/release/drover DROVER_STATE_DIR=$W/storage/drover LOG_CHANNEL=stderr LOG_LEVEL=critical
unset DATABASE_URL
artisan() { php "$APP/artisan" "$@"; }
"$DROVER_BINARY" migrate --database-url "host=$W port=5432 user=drover dbname=drover" >/dev/null
artisan migrate --force >/dev/null
left() { psql -h "$W" -U drover -d drover -XtAc "$1"; }
run() { # connection, count query, command...
  local conn=$1 query=$2; shift 2
  artisan app:eval "foreach (range(1, $JOBS) as \$i) { App\\Jobs\\OkJob::dispatch('listen-bench')->onConnection('$conn'); }"
  local start end
  start=$(date +%s.%N)
  setsid "$@" >"$W/$conn.log" 2>&1 &   # its own process group: queue:listen's child goes with it
  local pid=$!
  while [ "$(left "$query")" != 0 ]; do sleep 0.05; done
  end=$(date +%s.%N)
  kill -INT -- "-$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  awk -v s="$start" -v e="$end" -v n="$JOBS" -v c="$conn" 'BEGIN { printf "listen: %s: %d jobs in %.2f s, %.1f jobs/s\n", c, n, e - s, n / (e - s) }'
}
echo "listen: $JOBS no-op jobs each, Laravel $(artisan --version --no-ansi | awk '{print $3}'), $(nproc) cores"
run drover "SELECT count(*) FROM drover.jobs" php "$APP/artisan" queue:listen drover --tries=1
run database "SELECT count(*) FROM public.jobs" php "$APP/artisan" queue:listen database --tries=1 --sleep=0
