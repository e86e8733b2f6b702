#!/bin/sh
# A Docker engine for tests/docker.bats: uses the one that answers (DOCKER_HOST, else
# /var/run/docker.sock), or starts Debian's dockerd with its own data and socket in a temp
# folder (no iptables, no bridge: sandboxes have no network, and nothing on the host changes).
#
# Usage: tests/lib/docker-engine.sh up ENVFILE        ENVFILE gets DOCKER_HOST=... and, when
#                                                     this script started the engine, OWN_DIR=...
#        tests/lib/docker-engine.sh restart ENVFILE   stop and start the engine we started
#        tests/lib/docker-engine.sh down ENVFILE      stop it and remove its folder
# `up` exits 2 with the reason on stderr when no engine can run here.
set -u
cmd=${1:?usage: docker-engine.sh up|restart|down ENVFILE}
envfile=${2:?usage: docker-engine.sh up|restart|down ENVFILE}

answers() {
	DOCKER_HOST=$1 timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# start DIR: dockerd on DIR/docker.sock; waits until it answers.
start() {
	dir=$1
	mkdir -p "$dir"
	dockerd --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
		--host "unix://$dir/docker.sock" --iptables=false --ip-masq=false --bridge=none \
		--userland-proxy=false >>"$dir/dockerd.log" 2>&1 &
	i=0
	while ! answers "unix://$dir/docker.sock"; do
		i=$((i + 1))
		if [ $i -gt 150 ] || ! kill -0 $! 2>/dev/null; then
			echo "dockerd did not start; its log ends with:" >&2
			tail -5 "$dir/dockerd.log" >&2
			stop "$dir"
			return 2
		fi
		sleep 0.2
	done
}

# stop DIR: stops the dockerd of DIR (and the containerd it started), then unmounts leftovers.
stop() {
	dir=$1
	pid=$(cat "$dir/dockerd.pid" 2>/dev/null) || pid=
	if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do
			sleep 0.2
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null
	fi
	# Deepest first.
	grep -F " $dir/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
	return 0
}

case $cmd in
up)
	: >"$envfile"
	if [ -n "${DOCKER_HOST:-}" ] && answers "$DOCKER_HOST"; then
		echo "DOCKER_HOST=$DOCKER_HOST" >>"$envfile"
		exit 0
	fi
	if [ -S /var/run/docker.sock ] && answers unix:///var/run/docker.sock; then
		echo "DOCKER_HOST=unix:///var/run/docker.sock" >>"$envfile"
		exit 0
	fi
	command -v dockerd >/dev/null 2>&1 || { echo "no Docker engine answers and dockerd is not installed (apt-get install docker.io)" >&2; exit 2; }
	command -v docker >/dev/null 2>&1 || { echo "the docker CLI is not installed (apt-get install docker.io)" >&2; exit 2; }
	[ "$(id -u)" -eq 0 ] || { echo "no Docker engine answers, and starting one needs root" >&2; exit 2; }
	dir=$(mktemp -d /tmp/sbx-dockerd.XXXXXX)
	start "$dir" || { rm -rf "$dir"; exit 2; }
	printf 'DOCKER_HOST=unix://%s/docker.sock\nOWN_DIR=%s\n' "$dir" "$dir" >>"$envfile"
	;;
restart)
	. "$envfile"
	[ -n "${OWN_DIR:-}" ] || { echo "the engine was not started by the tests" >&2; exit 2; }
	stop "$OWN_DIR"
	start "$OWN_DIR"
	;;
down)
	. "$envfile"
	if [ -n "${OWN_DIR:-}" ]; then
		stop "$OWN_DIR"
		rm -rf "$OWN_DIR"
	fi
	;;
*)
	echo "usage: docker-engine.sh up|restart|down ENVFILE" >&2
	exit 2
	;;
esac
