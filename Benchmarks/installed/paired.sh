#!/usr/bin/env bash
# Whole-process timing of commands side by side, in paired rounds (paired.c): median wall and CPU time of each.
#   Benchmarks/installed/paired.sh RUNS /path/to/cmd ARGS... [-- /path/to/other ARGS...]...
# Commands are given by absolute path (they are run with execv, not looked up in PATH); each must exit 0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/paired" "$here/paired.c"
"$work/paired" "$@"
