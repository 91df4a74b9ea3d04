# Sourced by the scripts that run the real llama.cpp server of
# ../shared/real-engine on this machine (its CPU build: build.sh there,
# about 10 minutes, once). Defines pids, a cleanup trap that stops what
# they started; start_llama, which starts the server on 127.0.0.1:$PORT
# with its /metrics and waits for it to be healthy (log:
# $OUT/llama-server.log); and start_headroom, which runs the daemon with
# $OUT/headroom.yml on 127.0.0.1:$WEB (log: $OUT/serve.log). Also builds
# the headroom binary into $OUT.
#
# Environment: LLAMA_DIR (default ~/.cache/headroom-real-engine), PORT
# (18080), OUT (default: a temp dir); WEB, the caller's.

LLAMA_DIR=${LLAMA_DIR:-$HOME/.cache/headroom-real-engine}
PORT=${PORT:-18080}
OUT=${OUT:-$(mktemp -d)}
server=$LLAMA_DIR/llsrc/build/bin/llama-server
if [[ ! -x $server || ! -f $LLAMA_DIR/tiny.gguf ]]; then
	echo "no llama.cpp build in $LLAMA_DIR: run ../shared/real-engine/build.sh first" >&2
	exit 2
fi
mkdir -p "$OUT"
go build -o "$OUT/headroom" ./cmd/headroom

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

start_llama() {
	"$server" -m "$LLAMA_DIR/tiny.gguf" --host 127.0.0.1 --port "$PORT" --metrics \
		-c 32768 --parallel 8 --kv-unified --cont-batching -t 2 >"$OUT/llama-server.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 60); do
		curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0
		sleep 1
	done
	echo "llama-server not healthy after 60 s: $OUT/llama-server.log" >&2
	exit 1
}

start_headroom() {
	"$OUT/headroom" serve --config.file "$OUT/headroom.yml" --web.listen-address "127.0.0.1:$WEB" 2>"$OUT/serve.log" &
	pids+=($!)
}
