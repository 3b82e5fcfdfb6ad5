#!/bin/sh
# System tools the end-to-end tests drive for real: Debian's chromium (through Playwright; never
# `playwright install`, which downloads a browser) and neovim (a real LSP client). Idempotent:
# installs only what is missing, so it costs nothing on a machine that has both.
set -e
need=""
command -v chromium >/dev/null 2>&1 || need="$need chromium"
command -v nvim >/dev/null 2>&1 || need="$need neovim"
[ -z "$need" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
