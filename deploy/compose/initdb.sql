-- memsys's database and its two logins, made once by the PostgreSQL container's superuser when its data directory is
-- first created (docker-compose.yml mounts this file into /docker-entrypoint-initdb.d). As on a managed PostgreSQL
-- (docs/managed-postgres.md): the superuser makes the owner and the service role and creates pgvector; memsys
-- migrates as the owner, which is no superuser, and serves as the service role, which row-level security holds.
--
-- The passwords are read from the files named by MEMSYS_OWNER_PASSWORD_FILE and MEMSYS_APP_PASSWORD_FILE (compose
-- secrets, mounted under /run/secrets). psql variables may rename what is made: -v database=… -v owner=… -v app=….

\set ON_ERROR_STOP on
\if :{?database}
\else
  \set database memsys
\endif
\if :{?owner}
\else
  \set owner memsys_owner
\endif
\if :{?app}
\else
  \set app memsys_app
\endif
\set owner_password `cat "${MEMSYS_OWNER_PASSWORD_FILE:-/run/secrets/memsys_owner_password}"`
\set app_password `cat "${MEMSYS_APP_PASSWORD_FILE:-/run/secrets/memsys_app_password}"`

-- The owner: makes memsys's tables (migrations), its keys, and the service role's grants; not a superuser.
CREATE ROLE :"owner" LOGIN CREATEROLE NOSUPERUSER NOBYPASSRLS NOCREATEDB NOREPLICATION PASSWORD :'owner_password';
-- The service: every request and job; row-level security holds it.
CREATE ROLE :"app" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'app_password';
-- The owner may act as the service role (memsys migrate checks it), as an administrator grants on a managed server.
GRANT :"app" TO :"owner";

CREATE DATABASE :"database" OWNER :"owner";
\connect :"database"
-- Extensions are the administrator's: the owner may not create pgvector itself.
CREATE EXTENSION IF NOT EXISTS vector;
