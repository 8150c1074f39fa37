#!/usr/bin/env bash
# Installs (from Debian's packages) and starts the servers the tests need, idempotently:
#   Redis       127.0.0.1:6379, no persistence (no RDB snapshots, no AOF)
#   PostgreSQL  127.0.0.1:5432, trust auth for local TCP, user postgres, database "test"
# A server that already answers is left alone. With BROWSER=1, Debian's chromium is installed too (the
# console's browser tests drive it headless).
# Used by `make deps` and .ci/run; safe to run again at any time.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }
need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		log "FATAL: $1 needs root (apt-get, pg_ctlcluster); run this script as root or install it by hand"
		exit 1
	fi
}

apt_updated=
apt_install() {
	need_root "installing $*"
	if [ -z "$apt_updated" ]; then
		log "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		apt_updated=1
	fi
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
wait_for() { # what check
	for _ in $(seq 100); do "$2" && return 0; sleep 0.2; done
	log "FATAL: $1 did not start"
	return 1
}

# --- Redis ---------------------------------------------------------------------------------------
if ! redis_up; then
	command -v redis-server >/dev/null || apt_install redis-server
	# Debian's package may start its own service (with RDB snapshots); stop it so the one below,
	# without persistence, owns the port.
	if pgrep -x redis-server >/dev/null; then pkill -x redis-server || true; sleep 0.5; fi
	log "starting redis-server on 127.0.0.1:6379 (no persistence)"
	mkdir -p /tmp/leasehold-redis
	redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
		--dir /tmp/leasehold-redis --logfile /tmp/leasehold-redis/redis.log
	wait_for Redis redis_up
fi

# --- PostgreSQL ----------------------------------------------------------------------------------
if ! pg_up; then
	command -v pg_ctlcluster >/dev/null && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 ||
		apt_install postgresql
	need_root "starting PostgreSQL"
	ver=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
	if ! pg_lsclusters -h 2>/dev/null | awk '{print $1, $2}' | grep -qx "$ver main"; then
		log "creating PostgreSQL $ver cluster main"
		pg_createcluster "$ver" main >/dev/null
	fi
	conf=/etc/postgresql/$ver/main
	# Trust auth for loopback TCP: test servers only, never a deployment.
	if ! grep -q '^# leasehold tests' "$conf/pg_hba.conf"; then
		{
			echo '# leasehold tests: trust on loopback'
			echo 'host all all 127.0.0.1/32 trust'
			echo 'host all all ::1/128 trust'
			cat "$conf/pg_hba.conf"
		} >"$conf/pg_hba.conf.new"
		mv "$conf/pg_hba.conf.new" "$conf/pg_hba.conf"
	fi
	log "starting PostgreSQL $ver on 127.0.0.1:5432"
	pg_ctlcluster --skip-systemctl-redirect "$ver" main start -o "-c listen_addresses=127.0.0.1 -c port=5432" ||
		pg_ctlcluster --skip-systemctl-redirect "$ver" main restart -o "-c listen_addresses=127.0.0.1 -c port=5432"
	wait_for PostgreSQL pg_up
fi
if ! psql -h 127.0.0.1 -U postgres -Atc "select 1 from pg_database where datname = 'test'" | grep -q 1; then
	log "creating database test"
	psql -h 127.0.0.1 -U postgres -qc 'create database test'
fi

# --- Chromium (browser tests) --------------------------------------------------------------------
if [ "${BROWSER:-0}" = 1 ] && ! command -v chromium >/dev/null; then
	apt_install chromium
fi

log "redis $(redis-cli -h 127.0.0.1 -p 6379 ping), postgres $(pg_isready -h 127.0.0.1 -p 5432 | sed 's/.* - //')"
