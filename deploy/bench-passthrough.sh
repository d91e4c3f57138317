#!/usr/bin/env bash
# Requests per second straight to a fake upstream, through nginx proxy_pass
# and through ctxpress, measured side by side (interleaved rounds, one wrk
# setup for all) on this machine, for the pass-through path
# (POST /v1/embeddings) and the chat path (POST /v1/chat/completions with
# X-Session-ID over 64 conversations). The README's Performance figures
# come from it. Needs nginx and wrk on PATH (Debian: apt-get install nginx wrk).
#
#   bash deploy/bench-passthrough.sh [rounds]
#
# Environment (all optional):
#   PATHS=passthrough,chat   which paths to measure
#   DURATION=8s CONNECTIONS=16 THREADS=2   wrk's -d, -c, -t
#   BODY_BYTES=1024          size of the request body
#   CONVERSATIONS=64         X-Session-ID values of the chat path
#   NGINX_WORKERS=1          worker_processes of the nginx proxy
#   CTXPRESS_BIN=path        the ctxpress to measure (default: built from here)
#   BASE_BIN=path            another ctxpress measured beside it (e.g. main's)
#   CTXPRESS_ARGS="..."      extra serve flags for both (e.g. --log-level warn)
#   DB=file                  file: each ctxpress its own bolt db (the default
#                            config's kind of store); memory: no db
#   PORT_BASE=18300          the five ports used are PORT_BASE..PORT_BASE+4
#   PIN=1                    wrk on CPU 0, the servers on the other CPUs
#                            (see bench-lib.sh): steadier figures
# Each round prints the 1-minute load average: others' work on the machine
# moves every column, so compare columns within a round. Each round starts
# at the next setup, and the ratios' median over the rounds is printed:
# single rounds on shared cores move by ±10%.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
paths="${PATHS:-passthrough,chat}"
duration="${DURATION:-8s}" conns="${CONNECTIONS:-16}" threads="${THREADS:-2}"
body_bytes="${BODY_BYTES:-1024}" conversations="${CONVERSATIONS:-64}"
workers="${NGINX_WORKERS:-1}" port="${PORT_BASE:-18300}"
p_up=$port p_nginx=$((port + 1)) p_ctx=$((port + 2)) p_base=$((port + 3))
source deploy/bench-lib.sh
bin="${CTXPRESS_BIN:-}"
if [ -z "$bin" ]; then
	go build -o "$dir/ctxpress" .
	bin="$dir/ctxpress"
fi
# The upstream: fixed answers, as fast as nginx answers.
chat='{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],"usage":{"prompt_tokens":260,"completion_tokens":2,"total_tokens":262}}'
emb='{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":260,"total_tokens":260}}'
nginx_at "$dir/up" "$p_up" 1 "default_type application/json;" \
	"location /v1/chat/completions { return 200 '$chat'; } location / { return 200 '$emb'; }"
declare -A pid_of=([direct]=$!)
nginx_at "$dir/proxy" "$p_nginx" "$workers" "upstream fake { server 127.0.0.1:$p_up; keepalive 32; }" \
	"location / { proxy_pass http://fake; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }"
pid_of[nginx]=$!

# ctxpress_at NAME BIN PORT: a ctxpress with the defaults (log level info,
# its own db), its log in $dir/NAME.log.
ctxpress_at() {
	# shellcheck disable=SC2086
	local db="$dir/$1.db"
	[ "${DB:-file}" = memory ] && db=""
	CTXPRESS_CONFIG= $on_servers "$2" serve --listen "127.0.0.1:$3" --upstream "http://127.0.0.1:$p_up/v1" \
		--db="$db" ${CTXPRESS_ARGS:-} 2>"$dir/$1.log" &
	pids+=($!)
}
setups=("direct=$p_up" "nginx=$p_nginx" "ctxpress=$p_ctx")
ctxpress_at ctxpress "$bin" "$p_ctx"
pid_of[ctxpress]=$!
if [ -n "${BASE_BIN:-}" ]; then
	ctxpress_at base "$BASE_BIN" "$p_base"
	pid_of[base]=$!
	setups+=("base=$p_base")
fi

# cpu_ticks NAME: the CPU time (user+system, in clock ticks) the serving
# process of NAME has used: nginx's workers, or ctxpress with all its threads.
# Per request it does not depend on what else the machine is running.
cpu_ticks() {
	local p=${pid_of[$1]} t=0
	for q in $p $(cat /proc/"$p"/task/*/children 2>/dev/null); do
		t=$((t + $(awk '{print $14 + $15}' /proc/"$q"/stat 2>/dev/null || echo 0)))
	done
	echo "$t"
}
tck=$(getconf CLK_TCK)

# median X...: the median of the numbers given. The ratios of single
# rounds move with what else the machine runs; their median is the figure.
median() {
	printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
for s in "${setups[@]}"; do
	for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:${s#*=}/" && break || sleep 0.1; done
done

# The request bodies: about BODY_BYTES of text in an embeddings input or in
# a chat message (the chat one over CONVERSATIONS conversations).
cat >"$dir/passthrough.lua" <<LUA
local text = string.rep("x", $body_bytes - 60)
local body = '{"model":"text-embedding-3-small","input":"' .. text .. '"}'
request = function()
  return wrk.format("POST", "/v1/embeddings",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer sk-bench"}, body)
end
LUA
cat >"$dir/chat.lua" <<LUA
local unit = "The build fails in pkg/server with undefined: handler. "
local text = string.rep(unit, math.max(1, math.floor(($body_bytes - 110) / #unit)))
local body = '{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"' .. text .. '"}]}'
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/chat/completions",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer sk-bench", ["X-Session-ID"]="bench-" .. (n % $conversations)}, body)
end
LUA

echo "wrk -t$threads -c$conns -d$duration, ${body_bytes}-byte bodies, nginx workers $workers, $(nproc) cores${on_load:+, wrk on CPU 0 and the servers on the rest}"
for path in ${paths//,/ }; do
	declare -A rps=() cpu=()
	ratio="" base_ratio="" loads=""
	for r in $(seq "$rounds"); do
		# Each round starts at the next setup: a machine that slows down or
		# speeds up during a round favours no setup over the rounds.
		order=("${setups[@]:$(((r - 1) % ${#setups[@]}))}" "${setups[@]:0:$(((r - 1) % ${#setups[@]}))}")
		for s in "${order[@]}"; do
			name="${s%=*}"
			t0=$(cpu_ticks "$name")
			out=$($on_load wrk -t"$threads" -c"$conns" -d"$duration" -s "$dir/$path.lua" "http://127.0.0.1:${s#*=}")
			t1=$(cpu_ticks "$name")
			n=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
			total=$(awk '/requests in/ {print $1}' <<<"$out")
			cpu[$name]+="$(awk -v t=$((t1 - t0)) -v hz="$tck" -v n="$total" 'BEGIN {printf "%10.1f", t / hz * 1e6 / n}')"
			if grep -q "Non-2xx" <<<"$out"; then n="$n!"; fi # answers that were not 2xx
			rps[$name]+="$(printf '%10s' "$n")"
			eval "v_$name=${n%!}"
		done
		ratio+="$(awk -v a="$v_ctxpress" -v b="$v_nginx" 'BEGIN {printf "%10.2f", a/b}')"
		if [ -n "${BASE_BIN:-}" ]; then
			base_ratio+="$(awk -v a="$v_base" -v b="$v_nginx" 'BEGIN {printf "%10.2f", a/b}')"
		fi
		loads+="$(printf '%10s' "$(cut -d' ' -f1 /proc/loadavg)")"
	done
	echo
	echo "$path ($([ "$path" = chat ] && echo "POST /v1/chat/completions, $conversations conversations" || echo "POST /v1/embeddings"))"
	printf '%-24s' "round:"; seq -s ' ' 1 "$rounds" | awk '{for(i=1;i<=NF;i++) printf "%10s", $i; print ""}'
	for s in "${setups[@]}"; do printf '%-24s%s\n' "${s%=*} (req/s)" "${rps[${s%=*}]}"; done
	printf '%-24s%s   median %s\n' "ctxpress / nginx" "$ratio" "$(median $ratio)"
	[ -n "$base_ratio" ] && printf '%-24s%s   median %s\n' "base / nginx" "$base_ratio" "$(median $base_ratio)"
	printf '%-24s%s\n' "load average (1 min)" "$loads"
	echo "CPU per request (µs; the serving process only: nginx's workers, ctxpress's threads):"
	for s in "${setups[@]}"; do printf '%-24s%s\n' "${s%=*}" "${cpu[${s%=*}]}"; done
	unset rps cpu
done
for name in ctxpress base; do
	[ -s "$dir/$name.log" ] || continue
	if grep -q '"level":"\(warn\|error\)"\|WRN\|ERR' "$dir/$name.log"; then
		echo; echo "$name logged warnings:"; grep '"level":"\(warn\|error\)"\|WRN\|ERR' "$dir/$name.log" | head -5
	fi
done
