#!/bin/sh
# The official memcached image's entrypoint, for memcrab.
set -e

# first arg is `-f` or `--some-option`
if [ "${1#-}" != "$1" ]; then
	set -- memcrab "$@"
fi

# memcached listens on every interface by default, memcrab on 127.0.0.1 only,
# which no one outside the container could reach: listen on every IPv4 address
# unless the command says where (-l, or -s for a unix socket).
if [ "$1" = memcrab ]; then
	listen=0.0.0.0
	for arg; do
		case "$arg" in
			-l* | --listen | --listen=* | -s* | --unix-socket | --unix-socket=*) listen= ;;
		esac
	done
	if [ -n "$listen" ]; then
		shift
		set -- memcrab -l "$listen" "$@"
	fi
fi

exec "$@"
