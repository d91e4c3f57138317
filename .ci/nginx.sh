#!/usr/bin/env bash
# Installs Debian's nginx for the replicas test (e2e/system/replicas_test.go
# runs two ctxpress processes behind its own nginx on 127.0.0.1, with a
# config in a temporary directory), which skips without it unless
# CTXPRESS_REQUIRE_NGINX=1. Needs root (CI containers run as root;
# elsewhere use sudo). The package's own service is not started.
set -euo pipefail
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
	"$(command -v nginx || echo /usr/sbin/nginx)" -v
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends nginx
/usr/sbin/nginx -v
