#!/bin/sh
# Resolves the Apache Kafka broker pinned by pom.xml from Maven Central into a
# cache outside the repository and prints the directory that holds its jars
# (the broker's classpath is that directory's *). A second run with the same
# pom only prints the path.
#
#   KAFKA_CACHE_DIR  overrides ${XDG_CACHE_HOME:-$HOME/.cache}/leasehold
#   MVN              the maven command (default: mvn)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
mvn_cmd=${MVN:-mvn}

version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
if [ -z "$version" ]; then
	echo "fetch.sh: no <kafka.version> in $here/pom.xml" >&2
	exit 1
fi
# The pom's digest names the cache entry, so that any change to it resolves anew.
sum=$(sha256sum "$here/pom.xml" | cut -c1-12)
cache=${KAFKA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold}
dir="$cache/kafka-$version-$sum"

if [ -f "$dir/.complete" ]; then
	echo "$dir/libs"
	exit 0
fi
command -v "$mvn_cmd" >/dev/null || {
	echo "fetch.sh: $mvn_cmd is not installed; Maven (with a JDK 17+) resolves the broker's jars" >&2
	exit 1
}

mkdir -p "$dir"
tmp="$dir/libs.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
echo "fetch.sh: resolving Apache Kafka $version from Maven Central into $dir" >&2
"$mvn_cmd" -q -B -f "$here/pom.xml" dependency:copy-dependencies \
	-DincludeScope=runtime -DoutputDirectory="$tmp" >&2
rm -rf "$dir/libs"
mv "$tmp" "$dir/libs"
touch "$dir/.complete"
echo "$dir/libs"
