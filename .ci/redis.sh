#!/usr/bin/env bash
# Installs Debian's redis-server for the Redis store's tests
# (state/redisserver_test.go start their own on 127.0.0.1), which skip
# without it unless CTXPRESS_REQUIRE_REDIS=1. Needs root (CI containers run
# as root; elsewhere use sudo).
set -euo pipefail
if command -v redis-server >/dev/null; then
	redis-server --version
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends redis-server
redis-server --version
