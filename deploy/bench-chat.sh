#!/usr/bin/env bash
# The chat path side by side on this machine (interleaved rounds): the
# fake upstream directly, nginx proxy_pass in front of it, and ctxpress
# (bbolt) in front of it, wrk with 16 connections posting a ~1 KiB chat
# body over 64 conversations. Extra ctxpress binaries (e.g. an older
# build) are measured in the same rounds. Needs nginx and wrk.
#   bash deploy/bench-chat.sh [rounds] [seconds] [other-ctxpress-binary...]
# PROFILE=1 also takes a 10 s CPU profile of ctxpress under load
# (cpu.pprof in the current directory).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}" secs="${2:-8}"
shift 2 2>/dev/null || shift $#
dir="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/ctxpress" .
bins=("$dir/ctxpress" "$@")
user=""
[ "$(id -u)" = 0 ] && user="user root;"
base=${BENCH_PORT:-19300}

nginx_at() { # DIR PORT HTTP-EXTRA LOCATION
	mkdir -p "$1/tmp"
	cat >"$1/nginx.conf" <<EOF
worker_processes 1;
$user
pid $1/pid;
error_log $1/err.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $1/tmp; proxy_temp_path $1/tmp;
  client_body_buffer_size 1m;
  $3
  server { listen 127.0.0.1:$2; location / { $4 } }
}
EOF
	nginx -p "$1" -c "$1/nginx.conf" -g 'daemon off;' &
	pids+=($!)
}
up=$base
nginx_at "$dir/up" $up "" "default_type application/json; return 200 '{\"id\":\"c\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Done.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":260,\"completion_tokens\":2,\"total_tokens\":262}}';"
nginx_at "$dir/ng" $((base + 1)) "upstream up { server 127.0.0.1:$up; keepalive 32; }" \
	"proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\";"
setups=("direct=$up" "nginx=$((base + 1))")
for i in "${!bins[@]}"; do
	port=$((base + 10 + i))
	printf 'debug: {pprof: true}\n' >"$dir/$port.yml"
	"${bins[$i]}" serve --listen "127.0.0.1:$port" --upstream "http://127.0.0.1:$up/v1" --config "$dir/$port.yml" \
		--db "$dir/$port.db" >"$dir/$port.log" 2>&1 &
	pids+=($!)
	name="ctxpress"
	[ "$i" -gt 0 ] && name="$(basename "${bins[$i]}")"
	setups+=("$name=$port")
done
for s in "${setups[@]}"; do
	for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${s#*=}/" && break || sleep 0.1; done
done

cat >"$dir/chat.lua" <<'EOF'
local text = string.rep("The build fails in pkg/server with undefined: handler. ", 17)
local body = '{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"' .. text .. '"}]}'
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/chat/completions",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer sk-bench", ["X-Session-ID"]="bench-" .. (n % 64)}, body)
end
EOF
declare -A results
for r in $(seq "$rounds"); do
	for s in "${setups[@]}"; do
		rps=$(wrk -t2 -c16 -d"${secs}s" -s "$dir/chat.lua" "http://127.0.0.1:${s#*=}" | awk '/Requests\/sec/ {printf "%.0f", $2}')
		results["${s%=*}"]+="$(printf '%8s' "$rps")"
	done
	results[load]+="$(printf '%8s' "$(cut -d' ' -f1 /proc/loadavg)")"
done
for s in "${setups[@]}"; do printf '%-22s%s\n' "${s%=*} (req/s)" "${results[${s%=*}]}"; done
printf '%-22s%s\n' "load average (1 min)" "${results[load]}"
if [ "${PROFILE:-}" = 1 ]; then
	port=$((base + 10))
	wrk -t2 -c16 -d14s -s "$dir/chat.lua" "http://127.0.0.1:$port" >/dev/null &
	sleep 2
	curl -s -o cpu.pprof "http://127.0.0.1:$port/ctxpress/debug/pprof/profile?seconds=10"
	curl -s -o heap.pprof "http://127.0.0.1:$port/ctxpress/debug/pprof/allocs"
	wait
	cp "$dir/ctxpress" ./ctxpress.bin
fi
