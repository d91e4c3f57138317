#!/usr/bin/env bash
# Throughput of one ctxpress vs two behind nginx, on bbolt and on Redis,
# measured side by side (interleaved rounds) on this machine: the figures
# in README.md's "Several replicas" come from it. Needs nginx, wrk and
# redis-server on PATH (Debian: apt-get install nginx wrk redis-server).
#   bash deploy/bench-replicas.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
source deploy/bench-lib.sh
go build -o "$dir/ctxpress" .
# The upstream: a fixed chat completion, as fast as nginx answers.
nginx_at "$dir/up" 18000 1 "" "location / { default_type application/json; return 200 '{\"id\":\"c\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Done.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":260,\"completion_tokens\":2,\"total_tokens\":262}}'; }"
redis-server --port 16379 --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" >"$dir/redis.log" &
pids+=($!)

# replica PORT STATE-YAML
replica() {
	printf '%s\n' "$2" >"$dir/$1.yml"
	"$dir/ctxpress" serve --listen "127.0.0.1:$1" --upstream http://127.0.0.1:18000/v1 --config "$dir/$1.yml" \
		--db "$dir/$1.db" >"$dir/$1.log" 2>&1 &
	pids+=($!)
}
replica 18101 "state: {backend: bolt}"
replica 18102 "state: {backend: redis, url: redis://127.0.0.1:16379/0, prefix: 'one:'}"
replica 18103 "state: {backend: redis, url: redis://127.0.0.1:16379/0, prefix: 'two:'}"
replica 18104 "state: {backend: redis, url: redis://127.0.0.1:16379/0, prefix: 'two:'}"
lb="proxy_pass http://ctxpress; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_next_upstream error timeout; proxy_buffering off;"
nginx_at "$dir/lb1" 18201 1 "upstream ctxpress { server 127.0.0.1:18102; keepalive 32; }" "location / { $lb }"
nginx_at "$dir/lb2" 18202 1 "upstream ctxpress { server 127.0.0.1:18103; server 127.0.0.1:18104; keepalive 32; }" "location / { $lb }"
for port in 18000 18101 18102 18103 18104 18201 18202; do
	for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break || sleep 0.1; done
done

# A ~1 KiB chat body over 64 conversations.
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
printf '%-34s' "round:"; seq -s ' ' 1 "$rounds" | awk '{for(i=1;i<=NF;i++) printf "%10s", $i; print ""}'
declare -A results
for r in $(seq "$rounds"); do
	for setup in "one replica, bolt=18101" "one replica, redis=18102" "one replica, redis, nginx=18201" "two replicas, redis, nginx=18202"; do
		name="${setup%=*}" port="${setup#*=}"
		rps=$(wrk -t2 -c16 -d8s -s "$dir/chat.lua" "http://127.0.0.1:$port" | awk '/Requests\/sec/ {printf "%.0f", $2}')
		results["$name"]+="$(printf '%10s' "$rps")"
	done
done
for name in "one replica, bolt" "one replica, redis" "one replica, redis, nginx" "two replicas, redis, nginx"; do
	printf '%-34s%s\n' "$name (req/s)" "${results[$name]}"
done
