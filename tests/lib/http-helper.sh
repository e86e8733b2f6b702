#!/bin/sh
# http-helper.sh SESSION_PID WHAT: the HTTP helper (backends/http/helper.h) of a session's
# server, for a step of a session (lib/session.py runs a step's shell as its own child, so the
# step passes $PPID). The server is the session's child named sandbox-mcp; its helper, the
# server's child named sandbox-http that has not ended (one that ended and waits to be reaped
# does not count).
#   live     prints the helper's pid; fails when none runs
#   none     succeeds when none runs
#   nocurl   succeeds when the server itself has no libcurl mapped
#   nokey    succeeds when a helper runs and its environment holds no DAYTONA_API_KEY
#   kill     kills the helper (SIGKILL); fails when none runs
set -eu
child() { # PARENT NAME [live]: the pid of PARENT's child named NAME (not a zombie with live)
	for st in /proc/[0-9]*/stat; do
		# pid (comm) state ppid ...
		line=$(cat "$st" 2>/dev/null) || continue
		comm=${line#*(}
		comm=${comm%)*}
		rest=${line##*) }
		state=${rest%% *}
		ppid=${rest#* }
		ppid=${ppid%% *}
		if [ "$ppid" = "$1" ] && [ "$comm" = "$2" ] && { [ "${3:-}" != live ] || [ "$state" != Z ]; }; then
			echo "${line%% *}"
			return 0
		fi
	done
	return 1
}
server=$(child "$1" sandbox-mcp) || { echo "http-helper.sh: no server under $1" >&2; exit 1; }
helper=$(child "$server" sandbox-http live) || helper=
case $2 in
live) [ -n "$helper" ] && echo "$helper" ;;
none) [ -z "$helper" ] ;;
nocurl) ! grep -q libcurl "/proc/$server/maps" ;;
nokey) [ -n "$helper" ] && ! tr '\0' '\n' <"/proc/$helper/environ" | grep -q '^DAYTONA_API_KEY=' ;;
kill) [ -n "$helper" ] && kill -KILL "$helper" ;;
*) echo "http-helper.sh: what? $2" >&2; exit 2 ;;
esac
