# Run by bats once per file run (bats 1.5 and later find it beside the files).
setup_suite() { :; }

# A server that cannot finish removing its sandbox within its shutdown's 2 s leaves the rest to
# the next server on its state folder (doc/security.md, Leftovers); a test's state folder has no
# next server, so what is still mounted under this run's folder is unmounted here, and said, so
# that bats can remove the folder. Tests that check leftovers check them before this runs.
teardown_suite() {
	local m
	awk -v r="$BATS_RUN_TMPDIR/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
		echo "# left mounted by a server that ran out of shutdown time: $m (unmounted)" >&3
		umount -l "$m" 2>/dev/null
	done
	return 0
}
