#!/bin/sh
# The secrets docker-compose.yml reads, made once with random passwords: the PostgreSQL superuser's, the owner's
# (memsys_owner) and the service role's (memsys_app), and memsys's two database URLs holding the last two.
# Usage: deploy/compose/make-secrets.sh [directory]   (default: deploy/compose/secrets, which git ignores)
# Files that exist are kept: running it again changes nothing.
set -eu
dir=${1:-$(dirname "$0")/secrets}
mkdir -p "$dir"
chmod 700 "$dir"
umask 077

password() {
    [ -s "$dir/$1" ] || python3 -c "import secrets; print(secrets.token_urlsafe(24))" > "$dir/$1"
}
password postgres_password
password memsys_owner_password
password memsys_app_password
[ -s "$dir/memsys_database_url" ] ||
    echo "postgresql://memsys_owner:$(cat "$dir/memsys_owner_password")@db:5432/memsys" > "$dir/memsys_database_url"
[ -s "$dir/memsys_service_database_url" ] ||
    echo "postgresql://memsys_app:$(cat "$dir/memsys_app_password")@db:5432/memsys" > "$dir/memsys_service_database_url"
# The containers' users (postgres, memsys) read them through compose's bind mounts; the folder stays private.
chmod 644 "$dir"/*
echo "secrets in $dir"
