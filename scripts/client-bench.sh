#!/usr/bin/env bash
# client-bench.sh: headroom bench's client against hey (Debian's package) on
# one scripted streaming server on loopback (scripts/streamserver: first token
# 100 ms after arrival, then 128 tokens at 20 ms). For each client and number
# of concurrent streams it prints the TTFT overhead over the server's own
# first flush (client TTFT less server first-flush time; mean and p99) and
# the client's CPU time per 1,000 streamed chunks: the median of REPS runs,
# the runs' CPU figures in brackets.
#
#   scripts/client-bench.sh            # 256 and 1024 streams, 5 runs each
#   STREAMS="256" REPS=1 scripts/client-bench.sh
#   HEY=~/go/bin/hey scripts/client-bench.sh   # another hey: one built with this Go
#
# Each run sends 3 requests per stream. hey's TTFT is its "response delay":
# request written to first byte, which this server sends with the first
# token; headroom's starts at the same point. Needs hey (apt-get install -y hey).
set -euo pipefail
cd "$(dirname "$0")/.."
STREAMS=${STREAMS:-"256 1024"}
REPS=${REPS:-5}
PORT=${PORT:-18200}
HEY=${HEY:-hey}
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
command -v "$HEY" >/dev/null || { echo "client-bench: $HEY not found (apt-get install -y hey)" >&2; exit 1; }

go build -o "$work/headroom" ./cmd/headroom
go build -o "$work/streamserver" ./scripts/streamserver
ulimit -n 65536 2>/dev/null || true
"$work/streamserver" -listen "127.0.0.1:$PORT" -ttft 100ms -itl 20ms &
server=$!
url="http://127.0.0.1:$PORT"
for _ in $(seq 50); do curl -fsS "$url/v1/models" >/dev/null 2>&1 && break; sleep 0.1; done

# One use case at the grid's lengths, so bench measures one cell.
cat > "$work/config.yml" <<'EOF'
targets: []
scenarios: [{name: s, input_tokens: 64, output_tokens: 128}]
use_cases: [{name: u, scenario: s, e2e_max: 10s}]
EOF

# A 64-word prompt, as hey sends it every time.
python3 - "$work/body.json" <<'EOF'
import json, sys
json.dump({"model": "scripted", "max_tokens": 128, "min_tokens": 128, "ignore_eos": True, "stream": True,
           "stream_options": {"include_usage": True},
           "messages": [{"role": "user", "content": " ".join(["word"] * 64)}]}, open(sys.argv[1], "w"))
EOF

# stats CLIENT N: run one client, print "ttft_mean_ms ttft_p99_ms cpu_s requests" for the client and the server.
run() {
  local client=$1 n=$2 reqs=$(( 3 * $2 ))
  curl -fsS -X POST "$url/stats" >/dev/null
  case $client in
  headroom)
    rm -rf "$work/out"
    /usr/bin/time -f "%U %S" -o "$work/cpu" "$work/headroom" bench --log.level=warn --url "$url" --engine none --config.file "$work/config.yml" \
      --concurrency "$n" --requests-per-cell "$reqs" --output-tokens 128 --warmup 0 --out "$work/out" >/dev/null 2>"$work/bench.log"
    python3 - "$work/out/report.json" <<'EOF' > "$work/client"
import json, sys
c = json.load(open(sys.argv[1]))["cells"][0]
t = sorted(r["ttft_s"] for r in c["requests"])
print(1000 * sum(t) / len(t), 1000 * t[len(t) * 99 // 100], len(t))
EOF
    ;;
  hey)
    /usr/bin/time -f "%U %S" -o "$work/cpu" "$HEY" -n "$reqs" -c "$n" -t 60 -m POST -T application/json -D "$work/body.json" \
      -o csv "$url/v1/chat/completions" > "$work/hey.csv"
    python3 - "$work/hey.csv" <<'EOF' > "$work/client"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status-code"] == "200"]
t = sorted(float(r["Response-delay"]) for r in rows)
print(1000 * sum(t) / len(t), 1000 * t[len(t) * 99 // 100], len(t))
EOF
    ;;
  esac
  read -r mean p99 got < "$work/client"
  read -r user sys < "$work/cpu"
  curl -fsS "$url/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
mean, p99, got, cpu, n = map(float, sys.argv[1:])
chunks = got * 128
fmean, fp99 = s["first_flush_mean_ms"], s["first_flush_p99_ms"]
print(f"{mean - fmean:.1f} {p99 - fp99:.1f} {1000 * cpu / (chunks / 1000):.1f} {int(got)}")
' "$mean" "$p99" "$got" "$(python3 -c "print($user + $sys)")" "$n"
}

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf "%-8s %-8s %-28s %-26s %s\n" streams client "TTFT overhead mean/p99 (ms)" "client CPU per 1k chunks (runs)" "requests"
for n in $STREAMS; do
  : > "$work/runs.headroom"; : > "$work/runs.hey"
  # Interleaved, so that a machine slowing down or speeding up weighs on both.
  for _ in $(seq "$REPS"); do
    for client in headroom hey; do run "$client" "$n" >> "$work/runs.$client"; done
  done
  for client in headroom hey; do
    mean=$(cut -d' ' -f1 "$work/runs.$client" | median)
    p99=$(cut -d' ' -f2 "$work/runs.$client" | median)
    cpu=$(cut -d' ' -f3 "$work/runs.$client" | median)
    reqs=$(cut -d' ' -f4 "$work/runs.$client" | median)
    printf "%-8s %-8s %-28s %-26s %s\n" "$n" "$client" "$mean / $p99" "$cpu ms ($(cut -d' ' -f3 "$work/runs.$client" | sort -n | paste -sd' '))" "$reqs"
  done
done
