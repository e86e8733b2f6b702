# The documentation: README.md is the front page, doc/*.md the pages it points to. Every
# relative link between them resolves, anchors included, and every page is reachable.
load lib/helpers
bats_require_minimum_version 1.5.0

DOCLINKS="$BATS_TEST_DIRNAME/lib/doclinks.py"

@test "docs: every link of README.md, doc/*.md and bench/README.md resolves, anchors included" {
	cd "$REPO_DIR"
	run python3 "$DOCLINKS" README.md doc/*.md bench/README.md
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "0 found" ]
}

@test "docs: the link check finds a missing file, a missing anchor in another page and in its own" {
	mkdir -p "$BATS_TEST_TMPDIR/d/doc"
	printf '# Top\n\n## A heading: `with` code\n\n## A heading: `with` code\n' >"$BATS_TEST_TMPDIR/d/doc/p.md"
	cat >"$BATS_TEST_TMPDIR/d/README.md" <<'MD'
[ok](doc/p.md#a-heading-with-code) [ok twice](doc/p.md#a-heading-with-code-1) [ok](#top-page)
[gone](doc/q.md) [no anchor](doc/p.md#nowhere)
[self](#missing) `[in code](nowhere.md)`
```
[in a fence](nowhere.md)
```
# Top page
MD
	cd "$BATS_TEST_TMPDIR/d"
	run python3 "$DOCLINKS" README.md doc/p.md
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${lines[0]}" = "README.md:2: (doc/q.md): doc/q.md does not exist" ]
	[ "${lines[1]}" = "README.md:2: (doc/p.md#nowhere): doc/p.md has no heading #nowhere" ]
	[ "${lines[2]}" = "README.md:3: (#missing): README.md has no heading #missing" ]
	[ "${lines[3]}" = "3 found" ]
}

@test "docs: README.md links every page of doc/, and names the licence" {
	local f
	for f in "$REPO_DIR"/doc/*.md "$REPO_DIR"/doc/sandbox-mcp.1; do
		grep -qF "](doc/$(basename "$f"))" "$REPO_DIR/README.md" ||
			{ echo "README.md does not link doc/$(basename "$f")" >&2; return 1; }
	done
	grep -q '^Copyright (c) 2026 the sandbox-mcp authors$' "$REPO_DIR/LICENSE"
	grep -qF 'MIT licence: see [LICENSE](LICENSE)' "$REPO_DIR/README.md"
}
