#!/usr/bin/env bash
# The same drain through two drover binaries, interleaved (A/B of a change): JOBS no-op jobs,
# `drover run --workers 4 --prefetch 8 --spawn fork --stop-when-empty`, RUNS runs each, a VACUUM
# ANALYZE before each, the median printed. Build the old one in a worktree, e.g.
#   git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release -p drover-cli)
# Usage: bench/ab-binaries.sh OLD_BINARY NEW_BINARY [JOBS=20000] [RUNS=5]
# AB_SCHEMAS=each: each binary drains its own database, migrated by itself (the change's schema
# costs counted); by default both drain one database migrated by NEW (the binaries alone).
set -euo pipefail
OLD=$1 NEW=$2 JOBS=${3:-20000} RUNS=${4:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/drover-ab.XXXX); chmod 755 "$W"; mkdir "$W/pg"; chown postgres "$W/pg"; chmod 700 "$W/pg"
trap 'runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -m fast stop >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$W/pg" -A trust -U drover >/dev/null
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -o "-k $W/pg -c listen_addresses=''" -l "$W/pg/server.log" start >/dev/null
db_of() { if [ "${AB_SCHEMAS:-}" = each ]; then echo "drover_$1"; else echo drover; fi; }
for which in old new; do
  db=$(db_of $which); bin=$NEW; [ "${AB_SCHEMAS:-}" = each ] && [ $which = old ] && bin=$OLD
  psql -h "$W/pg" -U drover -d postgres -qc "CREATE DATABASE $db" 2>/dev/null || true
  "$bin" migrate --database-url "host=$W/pg port=5432 user=drover dbname=$db" >/dev/null 2>&1
done
echo '<?php return static function ($job): void {};' > "$W/noop.php"
cat > "$W/fill.php" <<'PHP'
<?php
require $argv[1];
$p = new Drover\Producer(new PDO($argv[2], null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]));
for ($i = 0; $i < (int) $argv[3]; $i += 1000) { $p->enqueueMany(array_fill(0, min(1000, (int) $argv[3] - $i), '{}')); }
PHP
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A R
for run in $(seq "$RUNS"); do
  for which in old new; do
    bin=$OLD; [ $which = new ] && bin=$NEW
    db=$(db_of $which)
    URL="host=$W/pg port=5432 user=drover dbname=$db"; DSN="pgsql:host=$W/pg;port=5432;dbname=$db;user=drover"
    php "$W/fill.php" "$ROOT/php-client/autoload.php" "$DSN" "$JOBS"
    psql -h "$W/pg" -U drover -d "$db" -qc 'VACUUM ANALYZE drover.jobs' >/dev/null
    s=$(date +%s.%N)
    "$bin" run --database-url "$URL" --state-dir "$W/state" --workers 4 --prefetch 8 --spawn fork --stop-when-empty -- php "$ROOT/php-client/bin/drover-worker" "$W/noop.php" >"$W/m.log" 2>&1 || { cat "$W/m.log"; exit 1; }
    e=$(date +%s.%N)
    R[$which]+="$(awk -v s=$s -v e=$e -v n=$JOBS 'BEGIN{printf "%.0f", n/(e-s)}') "
  done
done
for which in old new; do echo "$which: ${R[$which]}jobs/s (median $(printf '%s\n' ${R[$which]} | median))"; done
