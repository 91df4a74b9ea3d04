#!/usr/bin/env bash
# Peak RSS of the daemon while it scrapes an engine /metrics page of N MB
# (two vLLM series and N MB of other families), on loopback.
# Usage: scripts/bigpage-rss.sh [MB...]   (default: 10 50)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/headroom
go build -o "$bin" ./cmd/headroom
dir=$(mktemp -d)
cat >"$dir/page.py" <<'PY'
import http.server, sys
size = int(sys.argv[2]) << 20
line = b'unrelated_metric_total{shard="' + b'x' * 60 + b'"} 1\n'
page = b'vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n' + line * (size // len(line))
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def handle_one_request(self):
        try: super().handle_one_request()
        except ConnectionResetError: pass  # headroom stops reading past its limit
    def do_GET(self):
        if self.path == '/metrics':
            self.send_response(200); self.send_header('Content-Length', str(len(page))); self.end_headers(); self.wfile.write(page); return
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data":[{"id":"m"}]}')
    def do_POST(self):
        self.send_response(500); self.end_headers()
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
PY
printf 'targets: [{name: big, url: "http://127.0.0.1:18900"}]\npower: {source: none}\nengine_scrape_interval: 1s\n' >"$dir/headroom.yml"
for mb in "${@:-10 50}"; do
  for m in $mb; do
    python3 "$dir/page.py" 18900 "$m" 2>/dev/null & page=$!
    sleep 1
    "$bin" --config.file "$dir/headroom.yml" --web.listen-address 127.0.0.1:18901 >"$dir/log" 2>&1 & hr=$!
    sleep 12
    up=$(curl -s 127.0.0.1:18901/metrics | awk '/^headroom_target_up/ {print $2}')
    echo "$m MB page: peak RSS $(awk '/VmHWM/ {printf "%.1f MB", $2/1024}' /proc/$hr/status), headroom_target_up $up"
    kill $hr $page; wait $hr $page 2>/dev/null || true
  done
done
