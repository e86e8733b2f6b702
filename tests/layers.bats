# The source tree's layers (doc/architecture.md): every #include "..." of the project points
# down, and no backend includes another's files. tests/lib/layers.py holds the layers.
load lib/helpers
bats_require_minimum_version 1.5.0

LAYERS="$BATS_TEST_DIRNAME/lib/layers.py"

# A copy of the source folders, to plant includes in.
copy_tree() {
	local t="$BATS_TEST_TMPDIR/tree"
	mkdir -p "$t"
	cp -r "$REPO_DIR/src" "$REPO_DIR/backends" "$REPO_DIR/agent" "$t/"
	echo "$t"
}

@test "layers: every project include points down, and no backend includes another's" {
	run python3 "$LAYERS" "$REPO_DIR"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "0 found" ]
}

@test "layers: the check finds an include that points up, one sideways between backends, and a folder of no layer" {
	local t
	t=$(copy_tree)
	run python3 "$LAYERS" "$t"
	[ "$status" -eq 0 ]
	# base includes the protocol; the local backend includes Docker's engine client; a new folder.
	printf '#include "../protocol/mcp.h"\n' >>"$t/src/base/err.c"
	printf '#include "../docker/dkapi.h"\n' >>"$t/backends/local/local.c"
	mkdir "$t/src/extra" && printf 'int x;\n' >"$t/src/extra/x.c"
	run python3 "$LAYERS" "$t"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"src/base/err.c:"*"includes src/protocol/mcp.h: up from base to protocol"* ]]
	[[ "$output" == *"backends/local/local.c:"*"includes backends/docker/dkapi.h: sideways, from backends/local to backends/docker"* ]]
	[[ "$output" == *"src/extra/x.c: in no layer"* ]]
	[ "${lines[-1]}" = "3 found" ]
}

@test "layers: a header that includes one of its own layer, or one below, is fine" {
	local t
	t=$(copy_tree)
	printf '#include "../base/err.h"\n#include "sandbox.h"\n' >>"$t/src/sandbox/sandbox.c"
	printf '#include "../agenthost/agentlink.h"\n' >>"$t/backends/docker/docker.c"
	run python3 "$LAYERS" "$t"
	echo "$output"
	[ "$status" -eq 0 ]
}
