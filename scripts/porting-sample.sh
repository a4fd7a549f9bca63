#!/usr/bin/env bash
# Builds and runs Tests/PortingSample (docs/PORTING.md's recipes on a real app and wrapper package) against this
# checkout, in a private keychain home. Exits non-zero when any check fails.
#   scripts/porting-sample.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
work="${PORTING_SAMPLE_DIR:-$root/.build-porting}"
mkdir -p "$work"
# The packages name swift-keychain by path: give this checkout that name whatever its folder is called.
ln -sfn "$root" "$work/swift-keychain"
rm -rf "$work/Wrapper" "$work/App.src"
cp -R Tests/PortingSample/Wrapper "$work/Wrapper"
mkdir -p "$work/App"
cp Tests/PortingSample/App/Package.swift "$work/App/"
rm -rf "$work/App/Sources" && cp -R Tests/PortingSample/App/Sources "$work/App/Sources"
(cd "$work/App" && swift build -q 2>&1 | grep -v "^warning: " || true)
bin="$(cd "$work/App" && swift build --show-bin-path)"
test -x "$bin/porting-sample" || { echo "porting sample: build failed" >&2; exit 1; }
# Recipes 2 and 3: Info.plist and the entitlements file beside the executable.
cat > "$bin/Info.plist" <<'PLIST'
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict><key>CFBundleIdentifier</key><string>com.example.porting-sample</string></dict></plist>
PLIST
cat > "$bin/porting-sample.entitlements" <<'PLIST'
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict><key>keychain-access-groups</key>
<array><string>com.example.porting-sample</string><string>group.example.shared</string></array></dict></plist>
PLIST
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
# A client identity to import, made by OpenSSL as a server's administrator would.
openssl req -x509 -nodes -days 2 -subj "/CN=porting client" -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
    -keyout "$home/client.key" -out "$home/client.pem" 2>/dev/null
openssl pkcs12 -export -inkey "$home/client.key" -in "$home/client.pem" -passout pass:sample -out "$home/client.p12"
# In-process (KEYCHAIN_BACKEND=embedded): a keychaind found in PATH would otherwise outlive this temporary home.
out="$(env HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
    KEYCHAIN_BACKEND=embedded PORTING_SAMPLE_P12="$home/client.p12" "$bin/porting-sample" 2>&1)" && status=0 || status=$?
echo "$out"
passed=$(echo "$out" | grep -c '^ok ' || true)
failed=$(echo "$out" | grep -c '^FAILED ' || true)
echo "porting sample: $passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] || exit 1

# docs/PORTING.md §6: a suite run again after each rebuild, through keychaind, with a private keychain per run (its
# own directories and its own keychaind): a rebuilt binary is a new program to keychaind, and in a home it has not
# used before it is the first to claim its groups. Twice, with a rebuild in between that changes the executable.
through_daemon() {
    local run_home
    run_home="$(mktemp -d)"
    mkdir -m 0700 "$run_home/run"
    local result=0
    env HOME="$run_home" XDG_DATA_HOME="$run_home/data" XDG_STATE_HOME="$run_home/state" \
        XDG_CONFIG_HOME="$run_home/config" XDG_RUNTIME_DIR="$run_home/run" PATH="$root/.build/debug:$PATH" \
        KEYCHAIN_BACKEND=daemon PORTING_SAMPLE_P12="$home/client.p12" "$bin/porting-sample" > "$run_home/out" 2>&1 || result=$?
    cat "$run_home/out"
    local ok bad
    ok=$(grep -c '^ok ' "$run_home/out" || true)
    bad=$(grep -c '^FAILED ' "$run_home/out" || true)
    # Removing the run's directory ends its keychaind (it stops when its socket is gone).
    rm -rf "$run_home"
    echo "porting sample through keychaind ($1): $ok passed, $bad failed"
    [ "$result" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$ok" -gt 0 ]
}
digest_before="$(sha256sum "$bin/porting-sample" | cut -d' ' -f1)"
through_daemon "first build"
echo "let rebuildStamp = \"$(date +%s%N)\"" > "$work/App/Sources/porting-sample/RebuildStamp.swift"
(cd "$work/App" && swift build -q 2>&1 | grep -v "^warning: " || true)
[ "$(sha256sum "$bin/porting-sample" | cut -d' ' -f1)" != "$digest_before" ] || { echo "porting sample: the rebuild did not change the executable" >&2; exit 1; }
through_daemon "after a rebuild"
