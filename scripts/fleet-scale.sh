#!/usr/bin/env bash
# One replica with N discovered targets (default 1000) x the default 5
# scenarios and 5 use cases, against `headroom sim serve --fleet N` on
# loopback (each target a simulated engine of its own, found through
# http_sd). After DURATION it prints the daemon's RSS, goroutines, CPU,
# probes, and its /metrics page's size, scrape time in each format and what
# one scrape allocates.
# HISTOGRAMS=native sets probe_histograms: native. TIME_SCALE (default 1)
# runs the simulated engines faster: long-context probes finish sooner, so
# every target's every scenario has been probed (and has its histograms)
# within minutes, as after hours at scale 1.
# Usage: [HISTOGRAMS=both|native] [TIME_SCALE=x] scripts/fleet-scale.sh [N] [DURATION]   (default: 1000 10m)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000} duration=${2:-10m}
dir=$(mktemp -d)
go build -o "$dir/build/headroom" ./cmd/headroom
# The daemon runs from a copy, as an install (an image layer, a package)
# writes it: the linker's own output sits in the page cache as large
# folios that map whole, 12-17 MB more file-backed RSS for an idle daemon
# on this kernel (6.18, ext4) than the same bytes copied. The simulator
# runs from the build, so that its pages are not counted as the daemon's.
cp "$dir/build/headroom" "$dir/headroom"
"$dir/build/headroom" sim serve --fleet "$n" --time-scale "${TIME_SCALE:-1}" --listen 127.0.0.1:18960 --log.level warn >"$dir/sim.log" 2>&1 & simpid=$!
# The daemon starts once the list answers: its first http_sd refresh would
# fail, and the next comes a minute later.
for _ in $(seq 100); do curl -sf -o /dev/null 127.0.0.1:18960/targets && break; sleep 0.1; done
cat >"$dir/headroom.yml" <<YML
discovery:
  - http_sd_configs: [{url: "http://127.0.0.1:18960/targets"}]
power: {source: none}
probe_histograms: ${HISTOGRAMS:-both}
YML
"$dir/headroom" --config.file "$dir/headroom.yml" --web.listen-address 127.0.0.1:18961 >"$dir/headroom.log" 2>&1 & hrpid=$!
trap 'kill $hrpid $simpid 2>/dev/null || true' EXIT
sleep "$duration"
# What the probing cost so far, then the page timed with the fleet paused
# (SIGSTOP): a scrape's time is the exposition's, not the probes' contention.
read -r utime stime < <(awk '{print $14, $15}' /proc/$hrpid/stat)
cpu=$(awk -v u="$utime" -v s="$stime" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", (u + s) / hz}')
rss=$(awk '/VmRSS/ {printf "%.0f MB", $2/1024}' /proc/$hrpid/status)
rss_kinds=$(awk '/^Rss:/ {r = $2} /^Anonymous:/ {a = $2} END {printf "anonymous %.0f MB, file-backed %.0f MB", a/1024, (r - a)/1024}' /proc/$hrpid/smaps_rollup)
peak=$(awk '/VmHWM/ {printf "%.0f MB", $2/1024}' /proc/$hrpid/status)
curl -s -o /dev/null 127.0.0.1:18961/metrics
kill -STOP $simpid
sleep 3
m=$dir/metrics.txt
curl -s -o "$m" -w '%{time_total}' 127.0.0.1:18961/metrics >"$dir/t_text"
# What one scrape of the text page allocates: the daemon's allocation
# counter as the next scrape reads it, less its own reading on this page
# (the fleet is stopped: little else runs meanwhile).
alloc0=$(awk '$1 == "go_memstats_alloc_bytes_total" {print $2}' "$m")
alloc1=$(curl -s 127.0.0.1:18961/metrics | awk '$1 == "go_memstats_alloc_bytes_total" {print $2}')
curl -s -H 'Accept: application/openmetrics-text;version=1.0.0' -o "$dir/om.txt" -w '%{time_total}' 127.0.0.1:18961/metrics >"$dir/t_om"
curl -s -H 'Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited' -o "$dir/pb" -w '%{time_total}' 127.0.0.1:18961/metrics >"$dir/t_pb"
curl -s -H 'Accept-Encoding: gzip' -o "$dir/gz" 127.0.0.1:18961/metrics
val() { awk -v k="$1" '$1 == k {print $2}' "$m"; }
sum() { awk -v p="$1" 'index($1, p) == 1 {s += $2} END {print s + 0}' "$m"; }
kill -CONT $simpid
# Lone probes and calibration bursts' probes: the CPU is spent on both.
probes=$(($(sum 'headroom_probes_total{') + $(sum 'headroom_calibration_probes_total{')))
echo "histograms:            ${HISTOGRAMS:-both}, time scale ${TIME_SCALE:-1}"
echo "targets probed:        $(awk '/^headroom_targets\{.*state="probed"/ {print $2}' "$m") of $n, after $duration"
echo "probes:                $probes ($(awk 'index($1, "headroom_probes_total{result=\"success\"") == 1 || index($1, "headroom_calibration_probes_total{result=\"success\"") == 1 {s += $2} END {print s + 0}' "$m") successful, $(sum 'headroom_calibration_probes_total{') in bursts)"
echo "RSS:                   $rss, peak $peak ($rss_kinds)"
echo "goroutines:            $(val go_goroutines)"
echo "CPU:                   ${cpu} s ($(awk -v c="$cpu" -v p="$probes" 'BEGIN {printf "%.1f ms per probe, engine scrapes included", 1000 * c / p}'))"
echo "simulator CPU:         $(awk '{printf "%.0f s", ($14 + $15) / 100}' /proc/$simpid/stat)"
echo "/metrics series:       $(grep -vc '^#' "$m")"
echo "/metrics text:         $(wc -c <"$m" | awk '{printf "%.1f MB", $1 / 1048576}') in $(cat "$dir/t_text") s"
echo "/metrics text scrape:  $(awk -v a="$alloc0" -v b="$alloc1" 'BEGIN {printf "%.1f MB allocated", (b - a) / 1048576}')"
echo "heap in use:           $(val go_memstats_heap_inuse_bytes | awk '{printf "%.0f MB", $1 / 1048576}')"
echo "/metrics OpenMetrics:  $(wc -c <"$dir/om.txt" | awk '{printf "%.1f MB", $1 / 1048576}') in $(cat "$dir/t_om") s"
echo "/metrics protobuf:     $(wc -c <"$dir/pb" | awk '{printf "%.1f MB", $1 / 1048576}') in $(cat "$dir/t_pb") s"
echo "/metrics text, gzip:   $(wc -c <"$dir/gz" | awk '{printf "%.1f MB", $1 / 1048576}')"
echo "(target, scenario) pairs with a TTFT histogram: $(grep -c '^headroom_probe_ttft_seconds_count' "$m")"
echo "largest families (series):"
grep -v '^#' "$m" | sed 's/[{ ].*//; s/_bucket$//; s/_sum$//; s/_count$//' | sort | uniq -c | sort -rn | head -8 || true
echo "errors logged:         $(grep -c 'level=ERROR' "$dir/headroom.log" || true)"
