#!/bin/sh
# Builds the Jaeger v2 all-in-one binary pinned by this module's go.mod into a
# cache outside the repository and prints its path. A second run with the same
# Jaeger version only prints the path.
#
#   JAEGER_CACHE_DIR  overrides ${XDG_CACHE_HOME:-$HOME/.cache}/leasehold
#   GO                the go command (default: go)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
go_cmd=${GO:-go}

version=$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2; exit }
	$1 == "require" && $2 == "github.com/jaegertracing/jaeger" { print $3; exit }' "$here/go.mod")
if [ -z "$version" ]; then
	echo "build.sh: no github.com/jaegertracing/jaeger requirement in $here/go.mod" >&2
	exit 1
fi

cache=${JAEGER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold}
dir="$cache/jaeger-$version"
bin="$dir/jaeger"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$dir"
tmp="$dir/jaeger.tmp.$$"
trap 'rm -f "$tmp"' EXIT
echo "build.sh: building Jaeger $version into $bin (takes several minutes)" >&2
# -mod=readonly: every module is verified against the committed go.sum.
(cd "$here" && CGO_ENABLED=0 nice -n 10 "$go_cmd" build -mod=readonly -trimpath \
	-ldflags='-s -w' -o "$tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
mv -f "$tmp" "$bin"
echo "$bin"
