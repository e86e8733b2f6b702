# Run as a call after tests/lib/prestart-plant.py: what of the planted code ran, and which
# processes run in the sandbox, told apart by whose they are: this call's own (its pid, and the
# sleepers its own start made), the agent, and an interpreter waiting ahead. Prints the names
# that ran in this call's own start, then "others:" with any other code that ran or process
# that runs.
import os

me = os.getpid()
ran, mine, others = [], set(), []
try:
    lines = open('/workspace/marker').read().split('\n')
except FileNotFoundError:
    lines = []
for line in filter(None, lines):
    name, pid, child = line.rsplit(' ', 2)
    if int(pid) == me:
        ran.append(name)
        mine.add(int(child))
    else:
        others.append('ran ' + name)
for p in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):
    try:
        cmd = open('/proc/%d/cmdline' % p, 'rb').read().split(b'\0')
    except OSError:
        continue
    ahead = len(cmd) > 1 and cmd[1].startswith(b'/proc/self/') and cmd[1].endswith(b'/4')
    if p in (1, me) or p in mine or ahead:
        continue
    others.append('runs %d %r' % (p, cmd))
if lines:
    os.remove('/workspace/marker')
print('\n'.join(sorted(ran)))
print('others:', others)
