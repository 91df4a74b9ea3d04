#!/usr/bin/env bash
# Runs a real llama.cpp server on this machine (the CPU build of
# ../shared/real-engine: build.sh there, about 10 minutes, once), measures
# it with `headroom bench`, then runs the daemon against it for 15 minutes
# under stepped background load, and compares the daemon's capacity with
# the bench's limits for the same use cases. docs/real-engine.md holds its
# output.
#
# The use cases' thresholds are set so that their limits fall at a few
# requests on the tiny random-weight model with 2 CPU threads (one request
# of 2,000 prompt tokens: TTFT about 2.7 s, 73 tokens/s). On another
# machine, scale them to its single-request TTFT.
#
#   scripts/llamacpp-vs-bench.sh            # writes into $OUT (default: a temp dir)
#
# Environment: LLAMA_DIR (default ~/.cache/headroom-real-engine), PORT
# (18080), WEB (19835), MINUTES (15), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

WEB=${WEB:-19835}
MINUTES=${MINUTES:-15}
# shellcheck source=scripts/llamacpp-server.sh
. scripts/llamacpp-server.sh
start_llama

cat >"$OUT/headroom.yml" <<EOF
# A lab server: a tenth of its time for probes, each scenario every minute.
probe_budget: 0.1
targets:
  - {name: llama, url: 'http://127.0.0.1:$PORT', engine: llamacpp}
scenarios:
  - {name: chat-2k, input_tokens: 2000, output_tokens: 64, interval: 1m}
use_cases:
  - {name: chat, scenario: chat-2k, ttft_max: 10s, decode_min_tps: 5, window: 10m}
  - {name: fast-chat, scenario: chat-2k, ttft_max: 6s, window: 10m}
EOF

echo "== headroom bench ($(date -u +%H:%M:%S))"
"$OUT/headroom" bench --url "http://127.0.0.1:$PORT" --config.file "$OUT/headroom.yml" \
	--concurrency 1,2,3,4,6,8 --output-tokens 64 --out "$OUT/bench" 2>"$OUT/bench.log"

echo "== headroom serve for $MINUTES minutes under stepped load ($(date -u +%H:%M:%S))"
start_headroom

# Background users: each sends its next request (2,000 prompt tokens, 64
# out) when the last one ends. Steps of a fifth of the run: 0, 1, 2, 1, 0.
# Each prompt opens with a nonce, as production's differ: one prompt sent
# over and over comes from llama.cpp's prompt cache and loads its decode
# only (the run of 2026-11-24 11:06, docs/real-engine.md).
prompt=$(python3 -c 'print(" ".join(["word"] * 1990))')
user() {
	local until=$1
	while (($(date +%s) < until)); do
		curl -s -m 120 "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
			-d "{\"messages\":[{\"role\":\"user\",\"content\":\"$RANDOM$RANDOM $prompt\"}],\"max_tokens\":64}" >/dev/null || true
	done
}
step=$((MINUTES * 60 / 5))
start=$(date +%s)
for users in 0 1 2 1 0; do
	end=$(($(date +%s) + step))
	for _ in $(seq "$users"); do user "$end" & done
	sleep "$step"
	wait_users=$(jobs -pr | wc -l)
	echo "step of $users users done ($((($(date +%s) - start) / 60)) min, $wait_users jobs)"
done

curl -s "http://127.0.0.1:$WEB/metrics" >"$OUT/metrics.txt"
curl -s "http://127.0.0.1:$WEB/api/v1/status" >"$OUT/status.json"

echo "== compared ($(date -u +%H:%M:%S)); files in $OUT"
python3 - "$OUT" <<'EOF'
import json, re, sys
out = sys.argv[1]
bench = {l["use_case"]: l["capacity"] for l in json.load(open(f"{out}/bench/report.json"))["limits"]}
daemon = {}
for line in open(f"{out}/metrics.txt"):
    m = re.match(r'headroom_capacity_requests\{([^}]*)\} (\S+)', line)
    if m:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        daemon[labels["use_case"]] = float(m.group(2))
status = {e["use_case"]: e for e in json.load(open(f"{out}/status.json")).get("estimates", [])}
ok = True
print(f"{'use case':<10} {'bench limit':>11} {'daemon capacity':>15} {'bounds':>13} {'ratio':>6}  within 25%")
for name, b in bench.items():
    d = daemon.get(name, float("nan"))
    s = status.get(name, {})
    ratio = d / b if b else float("nan")
    within = abs(ratio - 1) <= 0.25
    ok &= within
    num = lambda v: "-" if v is None else f"{v:.2f}"
    bounds = f"{num(s.get('capacity_lower'))}-{num(s.get('capacity_upper'))}"
    print(f"{name:<10} {b:>11.2f} {d:>15.2f} {bounds:>13} {ratio:>6.2f}  {'yes' if within else 'no'}")
bursts = sum(1 for l in open(f"{out}/serve.log") if 'msg="calibration burst"' in l)
print(f"calibration bursts: {bursts}")
sys.exit(0 if ok else 1)
EOF
