#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test
# (proxy/ui_browser_test.go; the page is admin/ui), which is skipped when /usr/bin/chromium is
# absent. Needs root (CI containers run as root; elsewhere use sudo).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
	/usr/bin/chromium --version
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium fonts-dejavu-core
/usr/bin/chromium --version
