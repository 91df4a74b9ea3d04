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

# Waits until the server has no request in flight or deferred: a stopped
# daemon's probes can keep it busy for seconds, which the client's next
# request would wait out.
wait_idle() {
	for _ in $(seq 120); do
		curl -s "http://127.0.0.1:$PORT/metrics" |
			awk '/^llamacpp:requests_(processing|deferred) / {busy += $2} END {exit busy > 0}' && return 0
		sleep 0.5
	done
	echo "llama-server still busy after 60 s" >&2
}

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
	wait_idle
done
echo "== independent client, $N requests ($(date -u +%H:%M:%S))"
client >"$OUT/client-last.txt" 2>"$OUT/client-last.log"

echo "== compared; files in $OUT"
python3 - "$OUT" <<'PY'
import glob, re, statistics, sys
out = sys.argv[1]
targets = ("llchat", "llcompletions")

def page(path):
    """A round's series by (name, target, result)."""
    series = {}
    for line in open(path):
        m = re.match(r'(headroom_[a-z_]+)\{([^}]*)\} (\S+)', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            series[(m.group(1), labels.get("target"), labels.get("result", ""))] = float(m.group(3))
    return series

rounds = [page(p) for p in sorted(glob.glob(f"{out}/metrics-*.txt"))]
blocks = [[float(l) for l in open(f"{out}/client-{b}.txt")] for b in [*range(1, len(rounds) + 1), "last"]]
client = [v for b in blocks for v in b]
print(f"independent client: {len(client)} requests, mean TTFT {statistics.mean(client):.3f} s "
      f"(median {statistics.median(client):.3f}, min {min(client):.3f}, max {max(client):.3f})")

def total(name, target, result=""):
    # Each round's daemon started from zero: its counts and sums add up.
    return sum(r.get((name, target, result), 0) for r in rounds)

def lone(r, target):
    n = r.get(("headroom_probe_ttft_seconds_count", target, ""), 0)
    return n, r.get(("headroom_probe_ttft_seconds_sum", target, ""), 0)

print("by round: the client's mean TTFT before it, each target's lone probes' (count), the client's after")
for i, r in enumerate(rounds):
    cells = [f"{s / n:.2f} ({n:.0f})" if n else "- (0)" for n, s in (lone(r, t) for t in targets)]
    print(f"  {i + 1}: {statistics.mean(blocks[i]):.2f}, {', '.join(cells)}, {statistics.mean(blocks[i + 1]):.2f}")

# The client's mean at the minutes the probes ran: each round's lone probes
# weigh the mean of the client's blocks on either side of that round. "both"
# is what one histogram holding the bursts too would say, as before issue 41.
ok = True
print(f"{'target':<14} {'lone probes':>11} {'lone mean':>9} {'client':>6} {'ratio':>6}  within 35%  "
      f"{'bursts':>6} {'burst probes':>12} {'burst mean':>10} {'both':>6}")
for t in targets:
    n, s = total("headroom_probe_ttft_seconds_count", t), total("headroom_probe_ttft_seconds_sum", t)
    bn, bs = total("headroom_calibration_ttft_seconds_count", t), total("headroom_calibration_ttft_seconds_sum", t)
    weights = [(lone(r, t)[0], statistics.mean(blocks[i] + blocks[i + 1])) for i, r in enumerate(rounds)]
    mean = sum(k * c for k, c in weights) / n if n else float("nan")
    ratio = (s / n if n else float("nan")) / mean
    within = abs(ratio - 1) <= 0.35
    ok &= within
    burst = f"{bs / bn:.3f}" if bn else "-"
    both = (s + bs) / (n + bn) if n + bn else float("nan")
    print(f"{t:<14} {n:>11.0f} {s / n if n else float('nan'):>9.3f} {mean:>6.3f} {ratio:>6.2f}  {'yes' if within else 'no':<10}  "
          f"{total('headroom_calibration_bursts_total', t):>6.0f} {bn:>12.0f} {burst:>10} {both:>6.3f}")
    failed = sum(v for r in rounds for (name, tt, res), v in r.items()
                 if tt == t and res not in ("", "success") and name.endswith("probes_total"))
    if failed:
        print(f"  {t}: {failed:.0f} probes failed (lone and in bursts)")
sys.exit(0 if ok else 1)
PY
