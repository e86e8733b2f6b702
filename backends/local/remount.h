/*
 * Mount attributes set the way mount_setattr(2) sets them, where it answers ENOSYS (under
 * valgrind, or a seccomp policy around the server): each mount is remounted with MS_REMOUNT |
 * MS_BIND and its flags. Runs in the local sandbox's cloned child, so it makes only system calls
 * on its arguments and buffers of its own: no malloc, no locks.
 */
#ifndef SANDBOX_LOCAL_REMOUNT_H
#define SANDBOX_LOCAL_REMOUNT_H

#include <stdbool.h>

/* Adds attrs (MOUNT_ATTR_RDONLY, _NOSUID, _NODEV) to the mount at dst and, when recursive,
 * to every mount below it (found by mount ID, so dst need not be canonical), keeping the flags
 * each already has (a user namespace may not clear a flag its mount was locked with). 0, or -1
 * with errno (E2BIG when this namespace's mount table is too large to read whole). */
int remount_attrs(const char *dst, unsigned long attrs, bool recursive);

#endif
