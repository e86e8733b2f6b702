# For tests/image.bats and tests/image-attacks.bats, after their setup_file has set $SERVER (the
# server's command: docker run -i of the image) and defined nothing_left.

# refused_at_start [SERVER ARGS...]: the server's container, sent an initialize, exits 2 before
# answering anything, with one line on stderr ($stderr), and leaves nothing on the engine.
refused_at_start() {
	run --separate-stderr "$SERVER" "$@" <<<"$INIT"
	printf 'stderr: %s\n' "$stderr"
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	eventually 20 nothing_left
}
