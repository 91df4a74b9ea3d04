#!/usr/bin/env bash
# Runs a real llama.cpp server on this machine (scripts/llamacpp-server.sh)
# and sets the daemon's lone-probe TTFT histogram against an independent
# client's TTFT on the idle server (issue 41), in the configuration that
# once put calibration bursts into headroom_probe_ttft_seconds: two targets
# on the one server (chat and completions), a 1,000-token scenario every
# 4 s, probe_budget 1.0, calibration at its default. It prints, per target,
# the mean TTFT of headroom_probe_ttft_seconds (lone probes) and of
# headroom_calibration_ttft_seconds (the bursts' probes) over its rounds
# beside the client's, and exits 1 when a lone mean is not within 35% of
# it. docs/real-engine.md holds its output.
#
#   scripts/llamacpp-burst-ttft.sh          # writes into $OUT (default: a temp dir)
#
# Environment: LLAMA_DIR, PORT (18082), WEB (19837), ROUNDS (3),
# SECONDS_PER_ROUND (75, the daemon's), N (4: the client's requests before
# each round and after the last), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-18082}
WEB=${WEB:-19837}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_ROUND=${SECONDS_PER_ROUND:-75}
N=${N:-4}
# shellcheck source=scripts/llamacpp-server.sh
. scripts/llamacpp-server.sh
start_llama

# The independent client: one streaming chat request at a time on the idle
# server, a 1,000-token prompt opening with a nonce (as headroom's cold
# prompts do, so that no prompt cache answers it), its TTFT to the first
# content token. Prints one TTFT a line, and the prompt tokens on stderr.
client() {
	python3 - "$PORT" "$N" <<'PY'
import http.client, json, random, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
words = " ".join(["word"] * 985)
for _ in range(n):
    body = json.dumps({"messages": [{"role": "user", "content": f"{random.getrandbits(64):x} {words}"}],
                       "max_tokens": 32, "stream": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    first, prompt = None, 0
    for line in c.getresponse():
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        for ch in ev.get("choices") or []:
            if first is None and (ch.get("delta") or {}).get("content"):
                first = time.monotonic() - t0
        prompt = (ev.get("usage") or {}).get("prompt_tokens", prompt)
    c.close()
    print(f"{first:.4f}")
    print(f"prompt tokens {prompt}", file=sys.stderr)
PY
}

cat >"$OUT/headroom.yml" <<YML
probe_budget: 1.0
targets:
  - {name: llchat, url: 'http://127.0.0.1:$PORT', engine: llamacpp, api: chat}
  - {name: llcompletions, url: 'http://127.0.0.1:$PORT', engine: llamacpp, api: completions}
scenarios:
  - {name: ctx-1k, input_tokens: 1000, output_tokens: 32, interval: 4s}
use_cases:
  - {name: chat, scenario: ctx-1k, ttft_max: 5s, decode_min_tps: 5, window: 10m}
YML

# Rounds of the client, then the daemon (a new one, which calibrates
# afresh), each round's metrics kept, and the client once more: a machine
# shared with other work is slower at some minutes than at others, and
# both sides should meet the same minutes.
# A freshly started server's first request is slower: not a figure.
N=1 client >/dev/null 2>&1
for r in $(seq "$ROUNDS"); do
	echo "== round $r: independent client, $N requests; then headroom serve for $SECONDS_PER_ROUND s ($(date -u +%H:%M:%S))"
	client >"$OUT/client-$r.txt" 2>"$OUT/client-$r.log"
	"$OUT/headroom" serve --config.file "$OUT/headroom.yml" --web.listen-address "127.0.0.1:$WEB" 2>"$OUT/serve-$r.log" &
	daemon=$!
	pids+=("$daemon")
	sleep "$SECONDS_PER_ROUND"
	curl -s "http://127.0.0.1:$WEB/metrics" >"$OUT/metrics-$r.txt"
	kill "$daemon"
	wait "$daemon" 2>/dev/null || true
done
echo "== independent client, $N requests ($(date -u +%H:%M:%S))"
client >"$OUT/client-last.txt" 2>"$OUT/client-last.log"

echo "== compared; files in $OUT"
python3 - "$OUT" <<'PY'
import glob, re, statistics, sys
out = sys.argv[1]
# Each round's daemon started from zero: its counts and sums add up.
page = {}
for path in sorted(glob.glob(f"{out}/metrics-*.txt")):
    for line in open(path):
        m = re.match(r'(headroom_[a-z_]+)\{([^}]*)\} (\S+)', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            key = (m.group(1), labels.get("target"), labels.get("result", ""))
            page[key] = page.get(key, 0) + float(m.group(3))
client = [float(l) for path in sorted(glob.glob(f"{out}/client-*.txt")) for l in open(path)]
mean = statistics.mean(client)
print(f"independent client: {len(client)} requests, mean TTFT {mean:.3f} s "
      f"(median {statistics.median(client):.3f}, min {min(client):.3f}, max {max(client):.3f})")
ok = True
# "both": the mean of one histogram holding both, as before issue 41.
print(f"{'target':<14} {'lone probes':>11} {'lone mean':>9} {'ratio':>6}  within 35%  {'bursts':>6} {'burst probes':>12} {'burst mean':>10} {'both':>6}")
for target in ("llchat", "llcompletions"):
    g = lambda name, result="": page.get((name, target, result), 0)
    n, s = g("headroom_probe_ttft_seconds_count"), g("headroom_probe_ttft_seconds_sum")
    bn, bs = g("headroom_calibration_ttft_seconds_count"), g("headroom_calibration_ttft_seconds_sum")
    lone = s / n if n else float("nan")
    ratio = lone / mean
    within = abs(ratio - 1) <= 0.35
    ok &= within
    burst = f"{bs / bn:.3f}" if bn else "-"
    both = (s + bs) / (n + bn) if n + bn else float("nan")
    print(f"{target:<14} {n:>11.0f} {lone:>9.3f} {ratio:>6.2f}  {'yes' if within else 'no':<10}  "
          f"{g('headroom_calibration_bursts_total'):>6.0f} {bn:>12.0f} {burst:>10} {both:>6.3f}")
    failed = sum(v for (name, t, r), v in page.items() if t == target and r not in ("", "success") and name.endswith("probes_total"))
    if failed:
        print(f"  {target}: {failed:.0f} probes failed (lone and in bursts)")
sys.exit(0 if ok else 1)
PY
