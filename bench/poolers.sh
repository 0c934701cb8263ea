#!/usr/bin/env bash
# What a pooler costs, measured: one private PostgreSQL 15 and Debian's PgBouncer in front of it,
# in session and in transaction mode (pool size 8).
#  - The master: JOBS no-op jobs drained by `drover run --workers 4 --prefetch 8 --stop-when-empty` (plain PHP
#    workers, forked), connected directly and through the session pool (the transaction pool is
#    refused: docs/postgres-topologies.md). RUNS runs each, the median printed.
#  - A producer: DISPATCHES single enqueues (Drover\Producer::enqueue, autocommit) one after
#    another, directly and through both pools: p50 and p99 per enqueue.
# Usage: bench/poolers.sh [JOBS=20000] [DISPATCHES=2000] [RUNS=3]   (needs target/release/drover)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${1:-20000}
DISPATCHES=${2:-2000}
RUNS=${3:-3}
DROVER=$ROOT/target/release/drover
[ -x "$DROVER" ] || { echo "poolers.sh: build first: cargo build --release" >&2; exit 1; }
command -v pgbouncer >/dev/null || { echo "poolers.sh: pgbouncer missing: bash scripts/setup" >&2; exit 1; }
W=$(mktemp -d /tmp/drover-poolers.XXXX)
chmod 755 "$W"
mkdir "$W/pg" "$W/bouncer"
chown postgres "$W/pg" "$W/bouncer"
chmod 700 "$W/pg"
stop() {
  for ini in "$W"/bouncer/*.ini; do [ -f "${ini%.ini}.pid" ] && kill "$(cat "${ini%.ini}.pid")" 2>/dev/null || true; done
  runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap stop EXIT
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$W/pg" -A trust -U drover >/dev/null
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -o "-k $W/pg -c listen_addresses=''" -l "$W/pg/server.log" start >/dev/null
psql -h "$W/pg" -U drover -d postgres -qc 'CREATE DATABASE drover'
echo '"drover" ""' > "$W/bouncer/users.txt"
port_of() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -A PORT
for mode in session transaction; do
  PORT[$mode]=$(port_of)
  cat > "$W/bouncer/$mode.ini" <<INI
[databases]
drover = host=$W/pg port=5432 dbname=drover user=drover
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${PORT[$mode]}
unix_socket_dir =
auth_type = trust
auth_file = $W/bouncer/users.txt
pool_mode = $mode
default_pool_size = 8
max_client_conn = 100
logfile = $W/bouncer/$mode.log
pidfile = $W/bouncer/$mode.pid
INI
  chown postgres "$W/bouncer/$mode.ini"
  runuser -u postgres -- pgbouncer -d "$W/bouncer/$mode.ini"
done
DIRECT="host=$W/pg port=5432 user=drover dbname=drover"
declare -A URL=([direct]=$DIRECT [session]="host=127.0.0.1 port=${PORT[session]} user=drover dbname=drover" [transaction]="host=127.0.0.1 port=${PORT[transaction]} user=drover dbname=drover")
declare -A DSN=([direct]="pgsql:host=$W/pg;port=5432;dbname=drover;user=drover" [session]="pgsql:host=127.0.0.1;port=${PORT[session]};dbname=drover;user=drover" [transaction]="pgsql:host=127.0.0.1;port=${PORT[transaction]};dbname=drover;user=drover")
"$DROVER" migrate --database-url "$DIRECT" >/dev/null 2>&1
echo '<?php return static function ($job): void {};' > "$W/noop.php"
cat > "$W/produce.php" <<'PHP'
<?php
require $argv[1];
[$dsn, $n, $mode] = [$argv[2], (int) $argv[3], $argv[4]];
$producer = new Drover\Producer(new PDO($dsn, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]));
if ($mode === 'fill') {
    for ($i = 0; $i < $n; $i += 1000) {
        $producer->enqueueMany(array_fill(0, min(1000, $n - $i), '{}'));
    }
    exit;
}
$times = [];
for ($i = 0; $i < $n; $i++) {
    $t = hrtime(true);
    $producer->enqueue('{}');
    $times[] = (hrtime(true) - $t) / 1e6;
}
sort($times);
printf("%.3f %.3f\n", $times[intdiv($n, 2)], $times[(int) floor($n * 0.99)]);
PHP
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo "poolers: PostgreSQL 15, PgBouncer $(pgbouncer --version | awk '{print $2; exit}'), $(nproc) cores; $JOBS no-op jobs x $RUNS runs, $DISPATCHES dispatches"
# Interleaved, each run after a VACUUM, so that neither route pays for the table the other left.
declare -A RATES
for run in $(seq "$RUNS"); do
  for via in direct session; do
    php "$W/produce.php" "$ROOT/php-client/autoload.php" "${DSN[direct]}" "$JOBS" fill
    psql -h "$W/pg" -U drover -d drover -qc 'VACUUM ANALYZE drover.jobs' >/dev/null
    start=$(date +%s.%N)
    "$DROVER" run --database-url "${URL[$via]}" --state-dir "$W/state" --workers 4 --prefetch 8 --spawn fork --stop-when-empty \
      -- php "$ROOT/php-client/bin/drover-worker" "$W/noop.php" >"$W/master.log" 2>&1 || { cat "$W/master.log" >&2; exit 1; }
    end=$(date +%s.%N)
    RATES[$via]+="$(awk -v s="$start" -v e="$end" -v n="$JOBS" 'BEGIN { printf "%.0f", n / (e - s) }') "
  done
done
for via in direct session; do
  echo "poolers: master $via: ${RATES[$via]}jobs/s (median $(printf '%s\n' ${RATES[$via]} | median)), including its start and stop"
done
for via in direct session transaction; do
  read -r p50 p99 < <(php "$W/produce.php" "$ROOT/php-client/autoload.php" "${DSN[$via]}" "$DISPATCHES" time)
  echo "poolers: producer $via: enqueue p50 $p50 ms, p99 $p99 ms"
done
psql -h "$W/pg" -U drover -d drover -qc 'TRUNCATE drover.jobs' >/dev/null
