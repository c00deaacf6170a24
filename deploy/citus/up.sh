#!/usr/bin/env bash
# A local Citus cluster for memsys: a coordinator and two workers on 127.0.0.1, data under DIR.
#
#   deploy/citus/up.sh DIR      builds Citus and pgvector from ../shared/vendor against Debian's PostgreSQL 15
#                               (installing what it needs with apt), starts the nodes, registers the workers
#                               in the databases `memsys` and `memsys_test`, and prints the coordinator's URL last.
#   deploy/citus/down.sh DIR    stops them.
#
# Idempotent: a build already installed and nodes already running are reused. Ports: MEMSYS_CITUS_PORT (9700) for
# the coordinator, the next ones for the workers. MEMSYS_CITUS_WORKERS (2) workers are registered; MEMSYS_CITUS_SPARE
# (0) more are started with the databases and Citus ready but not registered: a machine an operator adds with
# `citus_add_node` (docs/scaling.md, "Growing a cluster while memsys serves"). Every node runs with wal_level = logical,
# which Citus's online shard moves need. Local connections are trusted: a development or CI cluster, not a
# production one (see docs/scaling.md).
set -euo pipefail

DIR=${1:?usage: deploy/citus/up.sh DIR}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
VENDOR=${MEMSYS_VENDOR_DIR:-$(cd "$HERE/../../.." && pwd)/shared/vendor}
PORT=${MEMSYS_CITUS_PORT:-9700}
PG_MAJOR=15
CITUS_VERSION=13.2.2
PGVECTOR_VERSION=0.8.6
DATABASES=(memsys memsys_test)
log() { echo "[citus] $*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
# PostgreSQL refuses to run as root: the nodes run as the `postgres` user the Debian package creates.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# 1. PostgreSQL 15 and the build dependencies (Debian bookworm's packages).
packages=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR build-essential liblz4-dev libzstd-dev libkrb5-dev
  libssl-dev libicu-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
BIN=$("$PG_CONFIG" --bindir)
EXT=$("$PG_CONFIG" --sharedir)/extension

# 2. pgvector and Citus, built once (the installed control files say whether a build is there).
BUILD="$DIR/build"
mkdir -p "$BUILD"
if [ ! -f "$EXT/vector--$PGVECTOR_VERSION.sql" ]; then
  log "building pgvector $PGVECTOR_VERSION"
  rm -rf "$BUILD/pgvector" && mkdir "$BUILD/pgvector"
  tar xzf "$VENDOR/pgvector-$PGVECTOR_VERSION.tar.gz" -C "$BUILD/pgvector" --strip-components=1
  make -s -C "$BUILD/pgvector" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" -j"$(nproc)" >/dev/null
  as_root make -s -C "$BUILD/pgvector" PG_CONFIG="$PG_CONFIG" install >/dev/null
fi
if ! grep -qs "default_version = '${CITUS_VERSION%.*}-" "$EXT/citus.control"; then
  log "building Citus $CITUS_VERSION (about 2 minutes)"
  rm -rf "$BUILD/citus" && mkdir "$BUILD/citus"
  tar xzf "$VENDOR/citus-$CITUS_VERSION.tar.gz" -C "$BUILD/citus" --strip-components=1
  # PostgreSQL 15.20 declares and exports have_createdb_privilege(); Citus 13.2.2 defines its own static copy for
  # every version below 16 ("static declaration follows non-static declaration"). Keep the copy below 15.20 only.
  perl -0pi -e 's/\nstatic inline bool\nhave_createdb_privilege\(void\)\n\{(.*?)\n\}\n/\n#if PG_VERSION_NUM < 150020\nstatic inline bool\nhave_createdb_privilege(void)\n{$1\n}\n#endif\n/s' \
    "$BUILD/citus/src/include/pg_version_compat.h"
  grep -q "PG_VERSION_NUM < 150020" "$BUILD/citus/src/include/pg_version_compat.h"
  (cd "$BUILD/citus" && ./configure -q PG_CONFIG="$PG_CONFIG" --without-libcurl >/dev/null)
  make -s -C "$BUILD/citus" -j"$(nproc)" >/dev/null
  as_root make -s -C "$BUILD/citus" install >/dev/null
fi

# 3. The nodes: the coordinator on $PORT, the workers (registered, then spare) on the next ports.
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
PLUGINS=""
if "$BIN/postgres" --describe-config 2>/dev/null | grep -c "^output_plugin_libraries" >/dev/null; then  # -c reads it all (pipefail)
  PLUGINS="output_plugin_libraries = 'pgoutput, test_decoding, citus'\n"
fi
WORKERS=${MEMSYS_CITUS_WORKERS:-2}
SPARE=${MEMSYS_CITUS_SPARE:-0}
nodes=(coordinator)
for i in $(seq 1 $((WORKERS + SPARE))); do nodes+=("worker$i"); done
for i in "${!nodes[@]}"; do
  data="$DIR/${nodes[$i]}"
  port=$((PORT + i))
  if [ ! -f "$data/PG_VERSION" ]; then
    log "initdb ${nodes[$i]}"
    as_pg "$BIN/initdb" -D "$data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >>"$data/postgresql.conf" <<CONF
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data'
max_connections = 300
max_prepared_transactions = 200
CONF
  fi
  # Online shard moves and splits replicate logically: wal_level = logical, and Citus's own decoder (for splits)
  # allowed as an output plugin (PostgreSQL 15.20 allows only pgoutput and test_decoding unless told).
  if ! grep -q "^wal_level = logical" "$data/postgresql.conf" ||
    { [ -n "$PLUGINS" ] && ! grep -q "^output_plugin_libraries" "$data/postgresql.conf"; }; then  # a cluster made before
    printf "wal_level = logical\n%b" "$PLUGINS" | as_pg tee -a "$data/postgresql.conf" >/dev/null
    as_pg "$BIN/pg_ctl" -D "$data" status >/dev/null 2>&1 && as_pg "$BIN/pg_ctl" -D "$data" -w -t 60 -m fast stop >/dev/null
  fi
  if ! as_pg "$BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_pg "$BIN/pg_ctl" -D "$data" -l "$DIR/${nodes[$i]}.log" -w -t 60 start >/dev/null
  fi
done

# 4. The databases, with Citus in each on every node, and the workers registered in the coordinator's.
psql_at() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -p "$1" -d "$2" -tA -c "$3"; }
for database in "${DATABASES[@]}"; do
  for i in "${!nodes[@]}"; do
    port=$((PORT + i))
    if [ -z "$(psql_at "$port" postgres "SELECT 1 FROM pg_database WHERE datname = '$database'")" ]; then
      psql_at "$port" postgres "CREATE DATABASE $database"
    fi
    psql_at "$port" "$database" "CREATE EXTENSION IF NOT EXISTS citus"
  done
  psql_at "$PORT" "$database" "SELECT citus_set_coordinator_host('127.0.0.1', $PORT)" >/dev/null
  for i in $(seq 1 "$WORKERS"); do
    port=$((PORT + i))
    if [ -z "$(psql_at "$PORT" "$database" "SELECT 1 FROM pg_dist_node WHERE nodeport = $port")" ]; then
      psql_at "$PORT" "$database" "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
    fi
  done
done
log "coordinator, $WORKERS workers and $SPARE spare up; Citus $(psql_at "$PORT" memsys "SELECT extversion FROM pg_extension WHERE extname = 'citus'")"
echo "postgresql://postgres@127.0.0.1:$PORT/memsys"
