#!/usr/bin/env bash
# Installs what the report's browser test needs: Chromium, which opens report.html
# headless and checks that every chart draws, without a JavaScript error or a page
# wider than the window (crates/nicsched/tests/report_html.rs). Idempotent:
# installs only what is missing.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-report.sh: run as root (sudo $0): it installs packages with apt-get" >&2
    exit 1
fi

if dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
    echo "setup-report.sh: chromium is installed"
    exit 0
fi

echo "setup-report.sh: installing chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium
echo "setup-report.sh: done"
