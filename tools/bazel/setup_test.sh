#!/usr/bin/env bash
# setup.sh's Go check, before it installs anything: a missing Go and a Go older than go.mod's are
# refused with a line saying what to install, and the step is announced first. Runs a copy of
# setup.sh next to a copy of go.mod, with fake go binaries on PATH, so nothing is installed.
set -euo pipefail
setup="$1"
gomod="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tools/bazel" "$work/bin"
cp "$setup" "$work/tools/bazel/setup.sh"
cp "$gomod" "$work/go.mod"
need=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$gomod")

expect() { # expect NAME PATH WANT: setup.sh exits 1 and its stderr holds WANT
  local out rc=0
  out=$(env PATH="$2" bash "$work/tools/bazel/setup.sh" 2>&1) || rc=$?
  if [ "$rc" -ne 1 ]; then echo "$1: exit $rc, want 1; output:"; echo "$out"; exit 1; fi
  grep -qF "setup: checking Go ..." <<<"$out" || { echo "$1: no step line:"; echo "$out"; exit 1; }
  grep -qF "$3" <<<"$out" || { echo "$1: want '$3' in:"; echo "$out"; exit 1; }
}

# No go at all: only the shell's basic tools on PATH.
for tool in bash sed sort head env cat dirname; do ln -s "$(command -v "$tool")" "$work/bin/$tool"; done
expect "no go" "$work/bin" "setup: go not found on PATH; install Go >= $need"

# A go older than go.mod's.
printf '#!/bin/sh\necho go1.20.1\n' >"$work/bin/go"
chmod +x "$work/bin/go"
expect "old go" "$work/bin" "setup: go 1.20.1 at $work/bin/go is older than go.mod's $need"
echo PASS
