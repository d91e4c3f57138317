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
	nginx -p "$1" -c "$1/nginx.conf" -g 'daemon off;' &
	pids+=($!)
}
