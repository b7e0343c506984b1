#!/usr/bin/env bash
# Make sure the databases the tests need answer on 127.0.0.1:
#   PostgreSQL :5432  user postgres, trust auth over TCP
#   MariaDB    :3306  user root, empty password over TCP
#   Redis      :6379
#
# Usage: scripts/services.sh [postgres] [mariadb] [redis]   (default: all three)
#
# Idempotent and silent when everything already answers. Otherwise it installs
# the missing Debian package (apt-get update once, then apt-get install), starts
# the server WITHOUT systemd (containers have none), fixes the auth settings the
# tests rely on and waits until the server answers.
#
# Environment:
#   SERVICES_TIMEOUT  seconds to wait for each server to answer (default 60)
#   SERVICES_LOG      where apt/server start output goes (default /tmp/queryapigate-services.log)
set -euo pipefail

TIMEOUT="${SERVICES_TIMEOUT:-60}"
LOG="${SERVICES_LOG:-/tmp/queryapigate-services.log}"
HBA_MARK="# queryapigate scripts/services.sh: tests connect over TCP without a password"

log() { echo "services.sh: $*" >&2; }
die() {
  echo "services.sh: ERROR: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 [postgres] [mariadb] [redis]   (default: all three)" >&2
  exit 2
}

# ---------------------------------------------------------------- privileges

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    die "need root (or passwordless sudo) to run: $*"
  fi
}

as_user() { # as_user USER cmd...
  local user=$1
  shift
  if [ "$(id -un)" = "$user" ]; then
    "$@"
  elif [ "$(id -u)" -eq 0 ]; then
    runuser -u "$user" -- "$@"
  else
    as_root runuser -u "$user" -- "$@"
  fi
}

# ---------------------------------------------------------------- helpers

have() { command -v "$1" >/dev/null 2>&1; }

tcp_open() { # tcp_open PORT: is anything listening on 127.0.0.1:PORT?
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

APT_UPDATED=0
apt_install() {
  have apt-get || die "apt-get not found; install $* yourself"
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update (log: $LOG)"
    as_root apt-get -o DPkg::Lock::Timeout=120 update >>"$LOG" 2>&1 ||
      { tail -n 20 "$LOG" >&2; die "apt-get update failed"; }
    APT_UPDATED=1
  fi
  log "installing $* (log: $LOG)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 \
    install -y --no-install-recommends "$@" >>"$LOG" 2>&1 ||
    { tail -n 20 "$LOG" >&2; die "apt-get install $* failed"; }
}

wait_for() { # wait_for NAME HINT cmd...: poll cmd until it succeeds or TIMEOUT passes
  local name=$1 hint=$2
  shift 2
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      die "$name did not answer within ${TIMEOUT}s ($hint)"
    fi
    sleep 0.5
  done
}

# ---------------------------------------------------------------- PostgreSQL

pg_ping() { pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }
pg_query() { psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -w -Atqc 'select 1'; }

# Sets PG_VER / PG_CLUSTER to the local cluster to use, creating one if needed.
pg_pick_cluster() {
  PG_VER="" PG_CLUSTER=""
  local line
  # prefer a cluster already configured for port 5432, else the first one
  line=$(pg_lsclusters -h 2>/dev/null | awk '$3 == 5432 { print; exit }')
  [ -n "$line" ] || line=$(pg_lsclusters -h 2>/dev/null | head -n 1)
  if [ -n "$line" ]; then
    PG_VER=$(awk '{ print $1 }' <<<"$line")
    PG_CLUSTER=$(awk '{ print $2 }' <<<"$line")
    return
  fi
  PG_VER=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$PG_VER" ] || die "no PostgreSQL server found under /usr/lib/postgresql"
  PG_CLUSTER=main
  log "creating PostgreSQL cluster $PG_VER/$PG_CLUSTER"
  as_root pg_createcluster --port 5432 "$PG_VER" "$PG_CLUSTER" >>"$LOG" 2>&1 ||
    { tail -n 20 "$LOG" >&2; die "pg_createcluster $PG_VER $PG_CLUSTER failed"; }
}

# Port 5432 and a listen address that covers 127.0.0.1.
pg_fix_listen() {
  local port listen
  port=$(pg_conftool -s "$PG_VER" "$PG_CLUSTER" show port 2>/dev/null || echo 5432)
  if [ "$port" != 5432 ]; then
    log "setting PostgreSQL $PG_VER/$PG_CLUSTER port $port -> 5432"
    as_root pg_conftool "$PG_VER" "$PG_CLUSTER" set port 5432
  fi
  listen=$(pg_conftool -s "$PG_VER" "$PG_CLUSTER" show listen_addresses 2>/dev/null || echo localhost)
  case ",${listen// /}," in
    *,localhost,* | *,127.0.0.1,* | *,\*,* | *,0.0.0.0,*) ;;
    *)
      log "setting PostgreSQL $PG_VER/$PG_CLUSTER listen_addresses '$listen' -> '$listen,127.0.0.1'"
      as_root pg_conftool "$PG_VER" "$PG_CLUSTER" set listen_addresses "$listen,127.0.0.1"
      ;;
  esac
}

# pg_hba.conf is first-match: put trust lines for loopback TCP at the top.
pg_fix_hba() {
  local hba
  hba=$(pg_conftool -s "$PG_VER" "$PG_CLUSTER" show hba_file 2>/dev/null ||
    echo "/etc/postgresql/$PG_VER/$PG_CLUSTER/pg_hba.conf")
  [ -f "$hba" ] || die "pg_hba.conf not found at $hba"
  if grep -qxF "$HBA_MARK" "$hba"; then
    die "PostgreSQL rejects postgres@127.0.0.1 although $hba already has the services.sh trust lines"
  fi
  log "adding trust auth for 127.0.0.1 to $hba"
  local tmp
  tmp=$(mktemp)
  {
    echo "$HBA_MARK"
    echo "host    all    all    127.0.0.1/32    trust"
    echo "host    all    all    ::1/128         trust"
    echo
    cat "$hba"
  } >"$tmp"
  as_root cp "$tmp" "$hba" # cp keeps the owner and mode of $hba
  rm -f "$tmp"
  as_root pg_ctlcluster "$PG_VER" "$PG_CLUSTER" reload
}

ensure_postgres() {
  if have pg_isready && pg_ping && have psql && pg_query >/dev/null 2>&1; then
    return 0
  fi
  if ! have pg_isready || ! have psql; then
    if tcp_open 5432; then
      apt_install postgresql-client # something listens already: only get the tools
    fi
  fi
  if ! pg_ping 2>/dev/null; then
    if ! have pg_ctlcluster || [ -z "$(ls /usr/lib/postgresql/*/bin/postgres 2>/dev/null)" ]; then
      apt_install postgresql
    fi
    pg_pick_cluster
  fi
  if ! pg_ping 2>/dev/null; then # (the Debian package may have started it from its postinst)
    [ -n "${PG_VER:-}" ] || pg_pick_cluster
    pg_fix_listen
    log "starting PostgreSQL $PG_VER/$PG_CLUSTER"
    # restart, not start: an online cluster that does not answer on 5432 needs
    # the port/listen fix above to take effect. pg_ctlcluster creates
    # /var/run/postgresql itself and drops to the cluster owner.
    if pg_lsclusters -h 2>/dev/null | awk -v v="$PG_VER" -v c="$PG_CLUSTER" '$1 == v && $2 == c && $4 ~ /online/ { f = 1 } END { exit !f }'; then
      as_root pg_ctlcluster "$PG_VER" "$PG_CLUSTER" restart >>"$LOG" 2>&1 || true
    else
      as_root pg_ctlcluster "$PG_VER" "$PG_CLUSTER" start >>"$LOG" 2>&1 || true
    fi
    wait_for PostgreSQL "see /var/log/postgresql/postgresql-$PG_VER-$PG_CLUSTER.log and $LOG" pg_ping
  fi
  if ! pg_query >/dev/null 2>&1; then
    have pg_lsclusters || die "PostgreSQL on 127.0.0.1:5432 rejects user postgres and is not a local Debian cluster"
    [ -n "${PG_VER:-}" ] || pg_pick_cluster
    pg_fix_hba
    wait_for "PostgreSQL (user postgres over TCP)" "check pg_hba.conf" pg_query
  fi
}

# ---------------------------------------------------------------- MariaDB

my_admin() { if have mariadb-admin; then mariadb-admin "$@"; else mysqladmin "$@"; fi; }
my_client() { if have mariadb; then mariadb "$@"; else mysql "$@"; fi; }
# mysqladmin ping exits 0 even when access is denied: it only says "server is up"
my_ping() { my_admin -h 127.0.0.1 -P 3306 -uroot --connect-timeout=2 ping; }
# up = ping works, or the server itself turned us away (fixed below via the socket)
my_up() {
  local out
  out=$(my_ping 2>&1) && return 0
  [[ $out == *"is not allowed to connect"* || $out == *"Access denied"* ]]
}
my_query() { my_client -h 127.0.0.1 -P 3306 -uroot --connect-timeout=2 -e 'select 1'; }

my_param() { # my_param NAME DEFAULT: value from the [mysqld] option groups
  local v
  v=$(my_print_defaults --mysqld 2>/dev/null | sed -n "s/^--$1=//p" | tail -n 1)
  echo "${v:-$2}"
}

my_start() {
  local datadir safe
  datadir=$(my_param datadir /var/lib/mysql)
  if [ ! -d "$datadir/mysql" ]; then
    log "initialising MariaDB data directory $datadir"
    as_root mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db >>"$LOG" 2>&1 ||
      { tail -n 20 "$LOG" >&2; die "mariadb-install-db failed"; }
  fi
  as_root install -d -m 755 -o mysql -g root /run/mysqld
  if have mariadbd-safe; then safe=mariadbd-safe; else safe=mysqld_safe; fi
  log "starting MariaDB ($safe)"
  # setsid -f: own session, forked off at once, so it outlives this script and
  # npm, and no shell lingers with the caller's stdout open
  as_root setsid -f "$safe" </dev/null >>"$LOG" 2>&1
}

ensure_mariadb() {
  if have mysqladmin || have mariadb-admin; then
    if my_query >/dev/null 2>&1; then
      return 0
    fi
  elif tcp_open 3306; then
    apt_install mariadb-client
  fi
  if ! my_up; then
    if [ ! -x /usr/sbin/mariadbd ] && [ ! -x /usr/sbin/mysqld ]; then
      apt_install mariadb-server
    fi
    # the Debian package may have started it from its postinst
    if ! my_up; then
      my_start
      wait_for MariaDB "see $(my_param log-error /var/log/mysql/error.log) and $LOG" my_up
    fi
  fi
  if ! my_query >/dev/null 2>&1; then
    # Debian creates root@localhost with unix_socket auth only; allow an empty
    # password too, and add root@127.0.0.1 (used over TCP with skip-name-resolve).
    log "allowing MariaDB root over TCP without password"
    local sock
    sock=$(my_param socket /run/mysqld/mysqld.sock)
    as_root "$(command -v mariadb || command -v mysql)" --protocol=socket -S "$sock" -uroot -e "
      ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
      CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
      ALTER USER 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
      GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
      FLUSH PRIVILEGES;" ||
      die "could not fix MariaDB root auth through socket $sock"
    wait_for "MariaDB (root over TCP)" "mysql -h 127.0.0.1 -uroot -e 'select 1' fails" my_query
  fi
}

# ---------------------------------------------------------------- Redis

redis_ping() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }

ensure_redis() {
  if have redis-cli; then
    redis_ping && return 0
  elif tcp_open 6379; then
    apt_install redis-tools
    redis_ping && return 0
  fi
  have redis-server || apt_install redis-server
  # the Debian package may have started it from its postinst
  redis_ping && return 0
  log "starting Redis"
  as_root install -d -m 755 /var/lib/redis /var/log/redis
  # No config file: loopback only, no persistence (tests flush it anyway).
  as_root redis-server --daemonize yes --bind 127.0.0.1 --port 6379 \
    --save '' --appendonly no --dir /var/lib/redis \
    --logfile /var/log/redis/ci.log --pidfile /var/run/redis.pid >>"$LOG" 2>&1 ||
    { tail -n 20 "$LOG" >&2; die "redis-server failed to start"; }
  wait_for Redis "see /var/log/redis/ci.log" redis_ping
}

# ---------------------------------------------------------------- main

want_pg=0 want_my=0 want_redis=0
[ $# -gt 0 ] || set -- postgres mariadb redis
for arg in "$@"; do
  case "$arg" in
    postgres | postgresql | pg) want_pg=1 ;;
    mariadb | mysql) want_my=1 ;;
    redis) want_redis=1 ;;
    all) want_pg=1 want_my=1 want_redis=1 ;;
    -h | --help) usage ;;
    *)
      echo "services.sh: unknown service '$arg'" >&2
      usage
      ;;
  esac
done

[ "$want_pg" -eq 0 ] || ensure_postgres
[ "$want_my" -eq 0 ] || ensure_mariadb
[ "$want_redis" -eq 0 ] || ensure_redis
