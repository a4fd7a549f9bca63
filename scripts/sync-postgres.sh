#!/usr/bin/env bash
# A private PostgreSQL for the sync server's tests and for trying the server locally: a new cluster in DIR that
# listens on a unix socket in DIR and nowhere else, stopped again with `stop`.
#   scripts/sync-postgres.sh start DIR   prints: socket=DIR/.s.PGSQL.5432 user=NAME database=NAME
#   scripts/sync-postgres.sh stop DIR
# PostgreSQL refuses to run as root: as root, the cluster belongs to `nobody`.
set -euo pipefail
command=${1:?start or stop}
dir=${2:?a directory}
bin() {
    command -v "$1" 2>/dev/null && return
    local found
    found=$(ls /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1)
    [ -n "$found" ] || { echo "sync-postgres: $1 not found (Debian: apt-get install postgresql)" >&2; exit 1; }
    echo "$found"
}
as_owner() {
    if [ "$(id -u)" = 0 ]; then setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; else "$@"; fi
}
owner=$( [ "$(id -u)" = 0 ] && echo nobody || id -un )
case "$command" in
start)
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown nobody:nogroup "$dir"
    as_owner "$(bin initdb)" -D "$dir/data" -U "$owner" --auth=trust --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$(bin pg_ctl)" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-c listen_addresses='' -k $dir -c fsync=off -c max_connections=200" start >/dev/null \
        || { cat "$dir/postgres.log" >&2; exit 1; }
    echo "socket=$dir/.s.PGSQL.5432 user=$owner database=postgres"
    ;;
stop)
    [ -d "$dir/data" ] && as_owner "$(bin pg_ctl)" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 64 ;;
esac
