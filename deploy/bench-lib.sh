# Shared by the bench scripts (sourced): a temp dir and the processes to
# stop at exit, and nginx_at, which starts an nginx of its own.
dir="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
user=""
[ "$(id -u)" = 0 ] && user="user root;" # workers as nobody could not write $dir

# PIN=1 splits the cores: the load generator (wrk) on CPU 0, the servers
# (the fake upstream, nginx, ctxpress) on the others. Each then competes
# only with its own side, so the figures move a few percent between
# rounds instead of ten; and ctxpress runs with the one P Go gives a
# process allowed one CPU on a 2-core machine, as in a container limited
# to one CPU. on_servers and on_load prefix the commands.
on_servers="" on_load=""
if [ "${PIN:-0}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
	on_servers="taskset -c 1-$(($(nproc) - 1))" on_load="taskset -c 0"
fi

# nginx_at DIR PORT WORKERS HTTP-BLOCK SERVER-BLOCK: an nginx of its own in
# DIR, listening on 127.0.0.1:PORT.
nginx_at() {
	mkdir -p "$1/tmp"
	cat >"$1/nginx.conf" <<CONF
worker_processes $3;
$user
pid $1/pid;
error_log $1/err.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $1/tmp; proxy_temp_path $1/tmp;
  client_body_buffer_size 1m;
  client_max_body_size 64m;
  keepalive_requests 100000;
  $4
  server { listen 127.0.0.1:$2; $5 }
}
CONF
	$on_servers nginx -p "$1" -c "$1/nginx.conf" -g 'daemon off;' &
	pids+=($!)
}
