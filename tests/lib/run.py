#!/usr/bin/env python3
"""The suite's runner (tests/run): runs bats files, several at once, and merges their TAP.

Usage: tests/run [-j N] [BATS FILES...]     (default: every tests/*.bats)

Each file runs as `bats --tap FILE` in a process session of its own, so that what its servers
leave can be told from what the files beside it leave (tests/lib/ours.py). Up to N files run at
once (-j, else $SANDBOX_TEST_JOBS, else twice the CPUs, at least 2 and at most 8): most of a
test's time is spent waiting on sandboxes, engines and timeouts, not on a CPU. A file that
shares state with others says so in a comment line of its own:

    # suite: serial          it runs alone: no other file runs meanwhile
    # suite: uses NAME...    it uses NAME beside other files that use it
    # suite: owns NAME...    no other file uses or owns NAME while it runs

The names: docker, the Docker engine (a server's start-up sweep removes any server's leftovers:
the file that checks the sweep and what is left owns it); test-index, the host's route to the
package index network of lib/test-index.bash.

Serial files run first, one by one; then the others, the longest first (the times of the last
run are kept in build/.test-times). Each file's TAP is printed whole when it ends, its tests
numbered on from the files before it, with the time it took; at the end come the plan, the
times of all files, and one line "N passed, N failed" (", N skipped" when tests were skipped).
A skipped test counts as failed when SANDBOX_TEST_NO_SKIP or CI is set. A test that a file
planned but never reported (bats died, or the file ran past $SANDBOX_TEST_FILE_TIMEOUT seconds,
default 1800) counts as failed, and so does a file whose bats exits non-zero with no test failed.
Exit status 0 only when nothing failed and something ran.
"""
import os, re, signal, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TIMES = os.path.join(REPO, "build", ".test-times")
MARK = re.compile(r"^#\s*suite:\s*(serial|uses|owns)\b(.*)$")


def markers(path):
    """(serial, names used, names owned) from a file's `# suite:` lines."""
    serial, uses, owns = False, set(), set()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = MARK.match(line.strip())
            if not m:
                continue
            if m.group(1) == "serial":
                serial = True
            elif m.group(1) == "uses":
                uses |= set(m.group(2).split())
            else:
                owns |= set(m.group(2).split())
    return serial, uses, owns


def load_times():
    times = {}
    try:
        with open(TIMES) as f:
            for line in f:
                name, _, secs = line.rstrip("\n").rpartition(" ")
                times[name] = float(secs)
    except (OSError, ValueError):
        pass
    return times


def save_times(times):
    try:
        os.makedirs(os.path.dirname(TIMES), exist_ok=True)
        with open(TIMES + ".tmp", "w") as f:
            for name, secs in sorted(times.items()):
                f.write("%s %.1f\n" % (name, secs))
        os.replace(TIMES + ".tmp", TIMES)
    except OSError:
        pass


class Job:
    def __init__(self, path):
        self.path = path
        self.serial, self.uses, self.owns = markers(path)
        self.log = tempfile.TemporaryFile()
        self.proc = None
        self.start = self.end = 0.0
        self.timed_out = False

    def launch(self):
        self.start = time.monotonic()
        # A bats of its own: none of an enclosing bats's variables (the runner may run inside one).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BATS_", "BASH_FUNC_bats"))}
        env["PATH"] = ":".join(d for d in env.get("PATH", "").split(":") if not d.rstrip("/").endswith("bats-core"))
        self.proc = subprocess.Popen(["bats", "--tap", self.path], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Tally:
    def __init__(self, no_skip):
        self.no_skip = no_skip
        self.number = self.planned = self.passed = self.failed = self.skipped = 0

    def report(self, job, rc):
        """Prints a finished file's TAP, renumbered, and counts it."""
        job.log.seek(0)
        text = job.log.read().decode("utf-8", "replace")
        plan, ran, failed = None, 0, 0
        out = ["# %s" % job.path]
        for line in text.splitlines():
            m = re.match(r"^1\.\.(\d+)$", line)
            if m and plan is None:
                plan = int(m.group(1))
                continue
            m = re.match(r"^(not ok|ok) \d+(.*)$", line)
            if m:
                ran += 1
                self.number += 1
                line = "%s %d%s" % (m.group(1), self.number, m.group(2))
                if m.group(1) == "not ok":
                    failed += 1
                elif re.search(r" # skip\b", m.group(2)):
                    if self.no_skip:
                        failed += 1
                    else:
                        self.skipped += 1
                else:
                    self.passed += 1
            out.append(line)
        missing = (plan - ran) if plan is not None and plan > ran else 0
        broke = None
        if job.timed_out:
            broke = "ran past %s s and was stopped" % FILE_TIMEOUT
        elif plan is None:
            broke = "bats planned no test (exit status %s)" % rc
            missing = max(missing, 1)
        elif missing:
            broke = "bats stopped after %d of %d tests (exit status %s)" % (ran, plan, rc)
        elif rc != 0 and failed == 0:
            broke = "bats exited with status %s, no test failed" % rc
            missing = 1
        if broke:
            missing = max(missing, 1)
            for _ in range(missing):
                self.number += 1
                out.append("not ok %d %s: %s" % (self.number, job.path, broke))
        self.planned += max(plan or 0, ran + missing)
        self.failed += failed + missing
        secs = job.end - job.start
        out.append("# %s: %.1f s, %d tests%s" % (job.path, secs, ran, ", %d failed" % (failed + missing) if failed + missing else ""))
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()


FILE_TIMEOUT = float(os.environ.get("SANDBOX_TEST_FILE_TIMEOUT") or 1800)


def default_jobs():
    env = os.environ.get("SANDBOX_TEST_JOBS")
    if env:
        return max(1, int(env))
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


def main(argv):
    jobs_n = None
    files = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-j" and i + 1 < len(argv):
            jobs_n = int(argv[i + 1]); i += 2; continue
        if a.startswith("-j") and a[2:].isdigit():
            jobs_n = int(a[2:]); i += 1; continue
        files.append(a); i += 1
    if jobs_n is None:
        jobs_n = default_jobs()
    if not files:
        d = os.path.join(REPO, "tests")
        files = sorted(os.path.join("tests", f) for f in os.listdir(d) if f.endswith(".bats"))
    for f in files:
        if not os.path.isfile(f):
            print("tests/run: no such file: %s" % f, file=sys.stderr)
            return 2
    times = load_times()
    jobs = [Job(f) for f in files]
    # Serial files first, in the order given; then the rest, the longest (last time) first.
    serial = [j for j in jobs if j.serial]
    rest = sorted((j for j in jobs if not j.serial), key=lambda j: -times.get(os.path.basename(j.path), 0))
    pending = serial + rest
    running = []
    tally = Tally(bool(os.environ.get("SANDBOX_TEST_NO_SKIP") or os.environ.get("CI")))
    finished = []
    began = time.monotonic()

    def stop(signum, _frame):
        for j in running:
            j.kill()
        print("# stopped by signal %d" % signum)
        sys.stdout.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print("# %d files, up to %d at once" % (len(jobs), jobs_n))
    sys.stdout.flush()

    def can_start(j):
        if len(running) >= jobs_n:
            return False
        if j.serial or any(r.serial for r in running):
            return not running
        # What one owns, no other file uses or owns meanwhile; what files only use, they share.
        return not any(j.owns & (r.uses | r.owns) or r.owns & (j.uses | j.owns) for r in running)

    while pending or running:
        for j in list(pending):
            # A serial file waits its turn: nothing starts past it while it waits.
            if can_start(j):
                pending.remove(j)
                j.launch()
                running.append(j)
            elif j.serial:
                break
        time.sleep(0.05)
        for j in list(running):
            rc = j.proc.poll()
            if rc is None and time.monotonic() - j.start > FILE_TIMEOUT:
                j.timed_out = True
                j.kill()
                rc = j.proc.wait()
            if rc is None:
                continue
            # The file's session may hold processes its bats left: they go with it.
            j.kill()
            j.end = time.monotonic()
            running.remove(j)
            tally.report(j, rc)
            finished.append(j)
            times[os.path.basename(j.path)] = j.end - j.start
    save_times(times)
    print("1..%d" % tally.planned)
    print("# times: %s" % ", ".join("%s %.0f s" % (os.path.basename(j.path), j.end - j.start)
                                     for j in sorted(finished, key=lambda j: j.start - j.end)))
    print("# all: %.0f s with up to %d files at once" % (time.monotonic() - began, jobs_n))
    if tally.skipped:
        print("%d passed, %d failed, %d skipped" % (tally.passed, tally.failed, tally.skipped))
    else:
        print("%d passed, %d failed" % (tally.passed, tally.failed))
    return 0 if tally.failed == 0 and tally.passed + tally.skipped > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
