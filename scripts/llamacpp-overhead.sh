#!/usr/bin/env bash
# Runs a real llama.cpp server on this machine (scripts/llamacpp-server.sh)
# and the daemon against it, idle, with prompts of two lengths, and prints
# the TTFT overhead the daemon takes from them (ttft_overhead_s in
# /api/v1/status, capacity.Overhead: the line through the quickest idle
# TTFTs at the two shortest prompt lengths, at length zero) beside those
# quickest TTFTs. The comparison script probes one length, so it never
# has an overhead. docs/real-engine.md holds its output.
#
#   scripts/llamacpp-overhead.sh            # writes into $OUT (default: a temp dir)
#
# Environment: LLAMA_DIR, PORT (18081), WEB (19836), MINUTES (4), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-18081}
WEB=${WEB:-19836}
MINUTES=${MINUTES:-4}
# shellcheck source=scripts/llamacpp-server.sh
. scripts/llamacpp-server.sh
start_llama

cat >"$OUT/headroom.yml" <<EOF
probe_budget: 0.1
targets:
  - {name: llama, url: 'http://127.0.0.1:$PORT', engine: llamacpp}
scenarios:
  - {name: chat-256, input_tokens: 256, output_tokens: 16, interval: 30s}
  - {name: chat-2k, input_tokens: 2000, output_tokens: 16, interval: 30s}
use_cases:
  - {name: chat, scenario: chat-2k, ttft_max: 10s, window: 10m}
  - {name: short, scenario: chat-256, ttft_max: 2s, window: 10m}
EOF

echo "== headroom serve for $MINUTES minutes, idle ($(date -u +%H:%M:%S))"
start_headroom
sleep $((MINUTES * 60))
curl -s "http://127.0.0.1:$WEB/api/v1/status" >"$OUT/status.json"

echo "== read ($(date -u +%H:%M:%S)); files in $OUT"
python3 - "$OUT" <<'EOF'
import json, sys
status = json.load(open(f"{sys.argv[1]}/status.json"))
for e in status.get("estimates", []):
    # Lone probes that met no other prefill, as capacity.Overhead takes them
    # (it also leaves out a burst's aftermath, which the status does not show).
    idle = [p["ttft_s"] for p in e["points"] if not p.get("burst") and 1 <= (p.get("level") or 0) <= 1.5]
    quickest = f"{min(idle):.3f} s" if idle else "-"
    print(f"{e['scenario']:<9} idle lone probes {len(idle):>2}  quickest TTFT {quickest}  ttft_overhead_s {e.get('ttft_overhead_s', 0)}")
EOF
