#!/usr/bin/env bash
# The HTML report's test drives a real headless browser: Debian's Chromium. Installed only
# when missing and when apt can be used (root); elsewhere that one test skips outside CI.
set -u
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
    >/dev/null || echo "setup-browser: could not install chromium" >&2
else
  echo "setup-browser: chromium not found; the browser test will be skipped (install Debian's chromium)" >&2
fi
exit 0
