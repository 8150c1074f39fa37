#!/usr/bin/env bash
# make redisperf: where Redis spends a leasehold job, by function. It builds the redis-server of the installed
# Debian package again from Debian's own source package (the upstream tarball and Debian's patches, from the
# security archive or the main one), with frame pointers so that perf can walk its stacks (the packaged binary is
# stripped and built without them), once per version into the user cache. Then it runs bench/compare's leasehold
# rounds (-only leasehold) on that server and records the server's main thread with perf for REDISPERF_SECONDS
# after a REDISPERF_WARMUP, and prints one figure a line: the share of the server's samples each piece of a
# job takes (inclusive: a function and what it calls), `redis_pct_<piece>=N %`, and the same in µs of Redis CPU a
# job (the share times the run's leasehold_redis_cpu_us_per_job), `redis_us_<piece>=N us`. The perf data is kept
# (REDISPERF_DATA) for `perf report -i`.
#
# Needs perf (Debian's linux-perf), a C toolchain and curl; runs as a user allowed to profile its own processes
# (kernel.perf_event_paranoid <= 2). env: REDISPERF_N (jobs, 800000), REDISPERF_WARMUP (4 s),
# REDISPERF_SECONDS (6), REDISPERF_DATA (a temporary file), REDISPERF_CACHE (~/.cache/leasehold/redisperf).
set -euo pipefail
cd "$(dirname "$0")/../.."

n=${REDISPERF_N:-800000}
warmup=${REDISPERF_WARMUP:-4}
secs=${REDISPERF_SECONDS:-6}
cache=${REDISPERF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/redisperf}
data=${REDISPERF_DATA:-$(mktemp -t redisperf.XXXXXX.data)}

for tool in perf curl make cc dpkg-query; do
	command -v "$tool" >/dev/null || { echo "redisperf: $tool not found (perf: apt-get install linux-perf)" >&2; exit 1; }
done
# Debian's build links its own jemalloc (the patched Makefile expects it).
dpkg-query -W -f '${Status}' libjemalloc-dev 2>/dev/null | grep -q installed ||
	{ echo "redisperf: libjemalloc-dev is needed (apt-get install libjemalloc-dev)" >&2; exit 1; }

# The installed package's version, e.g. 5:7.0.15-1~deb12u10: upstream 7.0.15, Debian revision 1~deb12u10.
full=$(dpkg-query -W -f '${Version}' redis-server)
ver=${full#*:}
upstream=${ver%%-*}
src=$cache/redis-$ver
bin=$src/redis-$upstream/src/redis-server
if [[ ! -x $bin ]]; then
	# From scratch: a build that failed half-way leaves patched sources, which patch would refuse.
	rm -rf "$src"
	mkdir -p "$src"
	for pool in debian-security/pool/updates debian/pool; do
		base=http://deb.debian.org/$pool/main/r/redis
		if curl -fsS -o "$src/orig.tar.gz" "$base/redis_$upstream.orig.tar.gz" &&
			curl -fsS -o "$src/debian.tar.xz" "$base/redis_$ver.debian.tar.xz"; then
			break
		fi
	done
	[[ -s $src/debian.tar.xz ]] || { echo "redisperf: Debian's source of redis $ver not found on deb.debian.org" >&2; exit 1; }
	tar -xzf "$src/orig.tar.gz" -C "$src"
	tar -xJf "$src/debian.tar.xz" -C "$src/redis-$upstream"
	(
		cd "$src/redis-$upstream"
		grep -v '^#' debian/patches/series | while read -r p; do
			if [[ -n $p ]]; then
				patch -p1 -s <"debian/patches/$p"
			fi
		done
		make -j"$(nproc)" USE_SYSTEM_JEMALLOC=yes MALLOC=jemalloc \
			OPTIMIZATION="-O2 -fno-omit-frame-pointer" CFLAGS="-fno-omit-frame-pointer" >"$src/build.log" 2>&1 ||
			{ echo "redisperf: build failed; see $src/build.log" >&2; exit 1; }
	)
fi
echo "redisperf_redis_version=$ver"

out=$(mktemp -t redisperf.XXXXXX.out)
trap 'rm -f "$out" "$out.bin" "$out.perf"' EXIT
(cd bench/compare && go build -o "$out.bin" .)
PATH=$(dirname "$bin"):$PATH "$out.bin" -only leasehold -rounds 1 -skip-long -n "$n" >"$out" 2>&1 &
bench=$!
pid=
for _ in $(seq 1 300); do
	# The bench's private server: its child process.
	pid=$(pgrep -P "$bench" -x redis-server || true)
	if [[ -n $pid ]]; then
		break
	fi
	sleep 0.1
done
[[ -n $pid ]] || { kill "$bench" 2>/dev/null; echo "redisperf: the bench's redis-server did not start" >&2; exit 1; }
sleep "$warmup"
if ! perf record -q -F 1999 -g -p "$pid" -o "$data" -- sleep "$secs" 2>"$out.perf"; then
	kill "$bench" 2>/dev/null
	cat "$out.perf" >&2
	echo "redisperf: perf record failed (kernel.perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid);" \
		"or the bench ended before REDISPERF_WARMUP + REDISPERF_SECONDS: raise REDISPERF_N)" >&2
	exit 1
fi
rm -f "$out.perf"
wait "$bench" || { cat "$out" >&2; echo "redisperf: the bench failed" >&2; exit 1; }
rm -f "$out.bin"
grep -E '^(host_|leasehold_(jobs_per_s|redis_cpu_us_per_job|worker_cpu_us_per_job))' "$out"
perjob=$(sed -n 's/^leasehold_redis_cpu_us_per_job=\([0-9.]*\) us$/\1/p' "$out")

# piece=function: the pieces of a job's Redis CPU, each a function's inclusive share (getGenericCommand, GET, also
# runs inside getdelCommand, GETDEL).
pieces=(
	script=evalGenericCommand
	script_body=luaV_execute
	redis_call=luaRedisGenericCommand
	redis_call_command=scriptCall
	keys_argv_tables=luaCreateArray
	lua_strings_interned=luaS_newlstr
	lua_gc=luaC_step
	hset=hsetCommand
	set=setCommand
	hget=hgetCommand
	pexpireat=expireGenericCommand
	del=delGenericCommand
	getdel=getdelCommand
	get=getGenericCommand
	reply_write=writeToClient
)
report=$(perf report -i "$data" --children --sort sym -g none 2>/dev/null | grep -v '^#')
for kv in "${pieces[@]}"; do
	piece=${kv%%=*} fn=${kv#*=}
	pct=$(awk -v f="$fn" '$NF == f { sub("%", "", $1); print $1; exit }' <<<"$report")
	if [[ -z $pct ]]; then
		# A function no sample reached (the build changed, or the recording missed the rounds).
		[[ $piece == script ]] && { echo "redisperf: no sample in $fn: did the recording cover the rounds?" >&2; exit 1; }
		pct=0
	fi
	echo "redis_pct_$piece=$pct %"
	awk -v p="$pct" -v j="$perjob" -v k="$piece" 'BEGIN { printf "redis_us_%s=%.2f us\n", k, p * j / 100 }'
done
echo "redisperf_data=$data"
