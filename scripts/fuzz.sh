#!/usr/bin/env bash
# Builds the libFuzzer targets (Fuzz/) and runs each over its committed corpus.
#   scripts/fuzz.sh [RUNS]       default 20000 executions per target (CI); the long run: scripts/fuzz.sh 1000000
# New inputs that reach new code are written to a scratch corpus; merge them into Fuzz/corpus/<target> with
#   FUZZ_MERGE=1 scripts/fuzz.sh RUNS
# A crash leaves crash-<hash> in Fuzz/artifacts/ and fails the run; fix it and add a regression test.
set -euo pipefail
runs="${1:-20000}"
cd "$(dirname "$0")/../Fuzz"
flags=(-c release --sanitize fuzzer -Xswiftc -parse-as-library)
build_log="$(mktemp)"
if ! swift build "${flags[@]}" > "$build_log" 2>&1; then
    grep -E "error|warning: " "$build_log" | head -40 || tail -40 "$build_log"
    echo "the fuzzers do not build"
    exit 1
fi
rm -f "$build_log"
bin="$(swift build "${flags[@]}" --show-bin-path)"
mkdir -p artifacts
export FUZZ_DEVICE_KEY="$PWD/fixtures/state/device.key"
# Swift's own backtracer would take the crash signal first and end the process before libFuzzer writes the input.
export SWIFT_BACKTRACE=enable=no
for target in query-parser:FuzzQueryParser keychain-file:FuzzKeychainFile command-line:FuzzCommandLine wire:FuzzWire \
    certificate:FuzzCertificate pkcs12:FuzzPKCS12 dbus:FuzzDBus backup:FuzzBackup; do
    corpus="corpus/${target%%:*}" program="$bin/${target##*:}"
    scratch="$(mktemp -d)"
    echo "== ${target##*:}: $runs runs over $corpus"
    if ! "$program" -runs="$runs" -max_len=65536 -timeout=10 -artifact_prefix=artifacts/ -print_final_stats=1 \
        "$scratch" "$corpus" > "$scratch.log" 2>&1; then
        # The reason and the crashing thread's first frames (the backtrace's tail is registers and images), then
        # the input itself, so that a CI log alone is enough to reproduce: base64 -d > input; FuzzX input
        grep -m1 -B2 -A30 -E "Fatal error|Precondition failed|Crash|deadly signal|ERROR: libFuzzer" "$scratch.log" \
            || tail -40 "$scratch.log"
        for input in $(grep -oE "artifacts/[a-z]+-[0-9a-f]+" "$scratch.log" | sort -u); do
            [ -f "$input" ] && echo "input $input (base64): $(head -c 8192 "$input" | base64 -w0)"
        done
        echo "fuzzing ${target##*:} failed: the input is in Fuzz/artifacts/"
        exit 1
    fi
    grep -E "^#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$scratch.log" || true
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then "$program" -merge=1 "$corpus" "$scratch" >/dev/null 2>&1; fi
    rm -rf "$scratch" "$scratch.log"
done
