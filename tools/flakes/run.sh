#!/usr/bin/env bash
# make flakes: runs the packages most exposed to timing (the root package, internal/cli and the embedded
# broker's internal/devkafka) under -race, FLAKES_COUNT times each (go test -count), while FLAKES_BUSY
# CPU-bound loops (default 2: one per core of the project's machines) run beside them, so that a test
# which only passes on an idle machine fails here. At the end it lists every failed test by name, with how
# many of its runs failed, and exits 1 on any failure. The busy loops are killed on exit, whatever ends the script.
#
# env: FLAKES_COUNT (3) runs of each test; FLAKES_PKGS (". ./internal/cli ./internal/devkafka"); FLAKES_BUSY (2);
#      FLAKES_RUN (a -run filter, empty: every test); FLAKES_TIMEOUT (60m, go test -timeout);
#      TEST_KAFKA / KAFKA_BROKERS as for every test (kfake by default); FLAKES_LOG (a directory for the
#      full test logs, default a temporary one, kept when a test failed).
set -uo pipefail
cd "$(dirname "$0")/../.."

count=${FLAKES_COUNT:-3}
pkgs=${FLAKES_PKGS:-. ./internal/cli ./internal/devkafka}
busy=${FLAKES_BUSY:-2}
logdir=${FLAKES_LOG:-$(mktemp -d -t leasehold-flakes.XXXXXX)}
mkdir -p "$logdir"

loops=()
stop_loops() {
	for p in "${loops[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${loops[@]}"; do
		wait "$p" 2>/dev/null
	done
	loops=()
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$busy"); do
	sh -c 'while :; do :; done' &
	loops+=($!)
done

printf 'flakes: %s, %s runs of each test, %s busy loops beside them, Kafka: %s; logs in %s\n' \
	"$pkgs" "$count" "$busy" "${KAFKA_BROKERS:-${TEST_KAFKA:-kfake}}" "$logdir"
start=$SECONDS
failed=0
unnamed=0 # packages that failed without a named test
for pkg in $pkgs; do
	log="$logdir/$(echo "$pkg" | tr '/.' '__').log"
	pstart=$SECONDS
	# -v so that every failure is named; one package at a time, so that the busy loops are the load.
	go test -race -v -count="$count" -timeout "${FLAKES_TIMEOUT:-60m}" ${FLAKES_RUN:+-run "$FLAKES_RUN"} "$pkg" >"$log" 2>&1
	rc=$?
	printf 'flakes: %s exit %d after %ds\n' "$pkg" "$rc" "$((SECONDS - pstart))"
	[ "$rc" -eq 0 ] && continue
	failed=1
	# Failed tests by name and count; a timeout's panic names the tests that were running.
	grep -E '^[[:space:]]*--- FAIL: ' "$log" | sed -E 's/^[[:space:]]*--- FAIL: ([^ ]+).*/\1/' | sort | uniq -c |
		while read -r n name; do printf 'flakes: FAIL %s %s (%d of %s runs)\n' "$pkg" "$name" "$n" "$count"; done
	if grep -q '^panic: test timed out' "$log"; then
		sed -n '/^panic: test timed out/,/^$/p' "$log" | grep -E '^[[:space:]]+Test' |
			while read -r name _; do printf 'flakes: TIMEOUT %s %s\n' "$pkg" "$name"; done
	fi
	if ! grep -qE -e '--- FAIL: |^panic: test timed out' "$log"; then
		printf 'flakes: %s failed without a named test (build error, panic or leak); the log ends:\n' "$pkg"
		unnamed=$((unnamed + 1))
		tail -n 30 "$log"
	fi
done
stop_loops
total=$((SECONDS - start))
# Test runs (top-level tests, each run counted) over every package, as one plain line.
passed=$(cat "$logdir"/*.log | grep -c '^--- PASS: ')
nfailed=$(($(cat "$logdir"/*.log | grep -c '^--- FAIL: ') + unnamed))
if [ "$failed" -ne 0 ]; then
	printf 'flakes: FAILED after %ds; full logs in %s\n' "$total" "$logdir"
	printf 'flakes: %d passed, %d failed\n' "$passed" "$nfailed"
	exit 1
fi
printf 'flakes: no failure in %s runs of each test of %s (%ds)\n' "$count" "$pkgs" "$total"
printf 'flakes: %d passed, %d failed\n' "$passed" "$nfailed"
[ -z "${FLAKES_LOG:-}" ] && rm -rf "$logdir"
exit 0
