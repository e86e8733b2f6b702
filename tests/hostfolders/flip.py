# flip.py DIR TARGET STOPFILE: until STOPFILE exists, swaps DIR with a symlink to TARGET and back,
# by renames, as fast as it can: a race against whatever binds DIR by its path.
import os, sys

d, target, stop = sys.argv[1:4]
os.symlink(target, d + ".evil")
while not os.path.exists(stop):
    os.rename(d, d + ".orig")
    os.rename(d + ".evil", d)
    os.rename(d, d + ".evil")
    os.rename(d + ".orig", d)
os.unlink(d + ".evil")
