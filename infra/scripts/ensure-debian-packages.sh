#!/usr/bin/env bash
# Installs the Debian packages named on the command line when a command they provide is
# missing. As root it runs apt-get; otherwise it prints the exact command and exits 3.
# Usage: ensure-debian-packages.sh COMMAND:PACKAGE [COMMAND:PACKAGE ...]
set -euo pipefail
# A command counts as there when it is on PATH or in the sbin folders (not on every PATH:
# a CI shell without /usr/sbin once ran apt-get update on every make lab-sim-up), or when
# its package is installed.
installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }
missing=()
for pair in "$@"; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || installed "$pkg" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
# shellcheck disable=SC2207
missing=($(printf '%s\n' "${missing[@]}" | sort -u))
if [ "$(id -u)" -ne 0 ]; then
  echo "error: missing Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 3
fi
echo "installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq -o Acquire::http::Timeout=30 -o Acquire::Retries=1 >/dev/null || true
apt-get install -y -qq "${missing[@]}" >/dev/null
