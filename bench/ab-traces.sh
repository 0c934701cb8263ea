#!/usr/bin/env bash
# What exporting traces costs: the same drain through one drover binary with `traces` off and on,
# interleaved — JOBS no-op jobs, one pool of 4 forked workers, prefetch 8, `--stop-when-empty`,
# RUNS runs each, a VACUUM ANALYZE before each, the median printed, and the spans the collector
# received. Every payload carries a `traceparent`, as a dispatch inside a traced request writes it,
# so each job makes a send, a process and a settle span. The collector is a local OTLP/HTTP sink
# (Python's http.server answering 200 to every POST and counting the bytes); the spans are encoded
# and sent, not decoded.
# Usage: bench/ab-traces.sh BINARY [JOBS=20000] [RUNS=5]
set -euo pipefail
BIN=$1 JOBS=${2:-20000} RUNS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/drover-abt.XXXX); chmod 755 "$W"; mkdir "$W/pg"; chown postgres "$W/pg"; chmod 700 "$W/pg"
cleanup() {
  [ -n "${SINK:-}" ] && kill "$SINK" 2>/dev/null || true
  runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$W/pg" -A trust -U drover >/dev/null
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$W/pg" -o "-k $W/pg -c listen_addresses=''" -l "$W/pg/server.log" start >/dev/null
URL="host=$W/pg port=5432 user=drover dbname=postgres"; DSN="pgsql:host=$W/pg;port=5432;dbname=postgres;user=drover"
"$BIN" migrate --database-url "$URL" >/dev/null 2>&1
cat > "$W/sink.py" <<'PY'
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0)); self.rfile.read(n)
        with open(sys.argv[2], "a") as f: f.write(f"{n}\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$W/sink.py" "$PORT" "$W/posts" & SINK=$!
echo '<?php return static function ($job): void {};' > "$W/noop.php"
cat > "$W/fill.php" <<'PHP'
<?php
require $argv[1];
$p = new Drover\Producer(new PDO($argv[2], null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]));
$payload = json_encode(['traceparent' => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'drover_sent_at' => microtime(true)]);
for ($i = 0; $i < (int) $argv[3]; $i += 1000) { $p->enqueueMany(array_fill(0, min(1000, (int) $argv[3] - $i), $payload)); }
PHP
for which in off on; do
  traces='null'; [ $which = on ] && traces="{\"endpoint\": \"http://127.0.0.1:$PORT\"}"
  cat > "$W/$which.json" <<JSON
{"version": 1, "database_url": "$URL", "state_dir": "$W/state", "traces": $traces,
 "pools": [{"name": "default", "queues": ["default"], "processes": 4, "prefetch": 8, "spawn": "fork",
            "command": ["php", "$ROOT/php-client/bin/drover-worker", "$W/noop.php"]}]}
JSON
done
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A R
for run in $(seq "$RUNS"); do
  for which in off on; do
    php "$W/fill.php" "$ROOT/php-client/autoload.php" "$DSN" "$JOBS"
    psql -h "$W/pg" -U drover -d postgres -qc 'VACUUM ANALYZE drover.jobs' >/dev/null
    s=$(date +%s.%N)
    "$BIN" run --config "$W/$which.json" --stop-when-empty >"$W/m.log" 2>&1 || { cat "$W/m.log"; exit 1; }
    e=$(date +%s.%N)
    grep -c "export queue is full\|cannot export" "$W/m.log" >> "$W/warnings" || true
    R[$which]+="$(awk -v s=$s -v e=$e -v n=$JOBS 'BEGIN{printf "%.0f", n/(e-s)}') "
  done
done
for which in off on; do echo "traces $which: ${R[$which]}jobs/s (median $(printf '%s\n' ${R[$which]} | median))"; done
echo "collector: $(wc -l < "$W/posts") requests, $(awk '{s += $1} END {print s}' "$W/posts") bytes for $((JOBS * RUNS)) traced jobs; runs whose master warned of dropped or unexported spans: $(awk '$1 > 0' "$W/warnings" | wc -l)"
