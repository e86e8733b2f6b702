/*
 * A process's start time, which with its pid names it: a pid reused by a later process has
 * another start time. Servers label what they make with both, so that a later server can tell
 * whether the one that made it is gone.
 */
#ifndef SANDBOX_PROCSTART_H
#define SANDBOX_PROCSTART_H

#include <sys/types.h>

/* Field 22 of /proc/PID/stat (starttime, in clock ticks since boot). 0, or -1 when the process
 * is gone or its stat cannot be read. */
int procstart(pid_t pid, unsigned long long *out);

#endif
