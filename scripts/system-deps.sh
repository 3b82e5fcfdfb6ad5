#!/bin/sh
# System tools the end-to-end tests drive for real: Debian's chromium (through Playwright; never
# `playwright install`, which downloads a browser) and neovim (a real LSP client); and the ARM
# cross-compiler with qemu's user-mode emulator, which build and run the kernels' self-test for
# aarch64 (specdec/kernels/selftest.py). Idempotent: installs only what is missing, so it costs
# nothing on a machine that has them all.
set -e
need=""
command -v chromium >/dev/null 2>&1 || need="$need chromium"
command -v nvim >/dev/null 2>&1 || need="$need neovim"
command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || need="$need g++-aarch64-linux-gnu"
command -v qemu-aarch64-static >/dev/null 2>&1 || need="$need qemu-user-static"
[ -z "$need" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
