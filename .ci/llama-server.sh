#!/usr/bin/env bash
# Builds llama.cpp's llama-server offline from the source shipped in the npm
# package node-llama-cpp (pinned), once: the binary is cached outside the
# checkout, keyed by version, and rebuilt only when missing.
#
#   .ci/llama-server.sh build          # prints the path of the binary
#   .ci/llama-server.sh verify         # checks the model's sha256
#   .ci/llama-server.sh start PORTFILE # starts it on a free loopback port; writes the port
#   .ci/llama-server.sh stop           # stops the server started by start
#
# Env: LLAMA_CACHE (default ~/.cache/ctxpress-llama), CTXPRESS_MODEL (default
# ../shared/models/stories260K.gguf next to the checkout).
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1
MODEL_SHA256=270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${LLAMA_CACHE:-$HOME/.cache/ctxpress-llama}/node-llama-cpp-$NODE_LLAMA_CPP_VERSION"
bin="$cache/llama-server"
model="${CTXPRESS_MODEL:-$here/../shared/models/stories260K.gguf}"
pidfile="$cache/llama-server.pid"

log() { echo "llama-server.sh: $*" >&2; }

build() {
	if [ -x "$bin" ]; then
		echo "$bin"
		return
	fi
	mkdir -p "$cache"
	if ! command -v cmake >/dev/null; then
		log "installing cmake"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2 && apt-get install -y -qq cmake >&2
	fi
	local work="$cache/work"
	rm -rf "$work" && mkdir -p "$work"
	log "fetching node-llama-cpp@$NODE_LLAMA_CPP_VERSION (for the llama.cpp source it ships)"
	(cd "$work" && npm init -y >/dev/null && npm install --ignore-scripts --no-audit --no-fund "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >&2)
	local bundle="$work/node_modules/node-llama-cpp/llama/gitRelease.bundle"
	[ -f "$bundle" ] || { log "no $bundle"; exit 1; }
	git clone -q "$bundle" "$work/llama.cpp" >&2
	log "building llama-server (about 6 minutes on 2 cores)"
	cmake -S "$work/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
		-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
		-DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF >&2
	cmake --build "$work/build" --target llama-server -j2 >&2
	cp "$work/build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
	rm -rf "$work"
	echo "$bin"
}

check_model() {
	[ -f "$model" ] || { log "model not found: $model"; exit 1; }
	echo "$MODEL_SHA256  $model" | sha256sum -c --quiet - >&2 || { log "model sha256 mismatch: $model"; exit 1; }
}

start() {
	local portfile="$1"
	build >/dev/null
	check_model
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000)))
	"$bin" -m "$model" --host 127.0.0.1 --port "$port" -c 2048 -t 1 --no-webui >"$cache/llama-server.log" 2>&1 &
	echo $! >"$pidfile"
	for _ in $(seq 1 100); do
		if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
			echo "$port" >"$portfile"
			log "serving on 127.0.0.1:$port (pid $(cat "$pidfile"))"
			return
		fi
		sleep 0.1
	done
	log "llama-server did not become ready:"
	tail -20 "$cache/llama-server.log" >&2
	exit 1
}

stop() {
	if [ -f "$pidfile" ]; then
		kill "$(cat "$pidfile")" 2>/dev/null || true
		rm -f "$pidfile"
	fi
}

case "${1:-}" in
build) build ;;
verify) check_model ;;
start) start "${2:?port file}" ;;
stop) stop ;;
*)
	echo "usage: $0 build | verify | start PORTFILE | stop" >&2
	exit 2
	;;
esac
