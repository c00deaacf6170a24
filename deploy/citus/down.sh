#!/usr/bin/env bash
# Stops the nodes deploy/citus/up.sh DIR started (the data and the build stay; up.sh DIR starts them again).
set -euo pipefail
DIR=${1:?usage: deploy/citus/down.sh DIR}
BIN=$(/usr/lib/postgresql/15/bin/pg_config --bindir)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
for data in "$DIR"/coordinator "$DIR"/worker*; do
  if [ -f "$data/postmaster.pid" ]; then
    as_pg "$BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  fi
done
echo "[citus] stopped" >&2
