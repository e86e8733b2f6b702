/*
 * The workspace's quota where the server cannot mount one itself (it is not root, or the host
 * has no loop devices): a named volume of the engine's `local` driver that is a tmpfs of the
 * quota. The engine mounts it (it is root) when the first container uses it, shares it with
 * every container of the sandbox (the install step's too), and unmounts it when the last one
 * stops, when its files are gone. The server never sees them on the host: they travel through
 * the agent.
 *
 * Its pages are memory, charged to the memory cgroup of the container that writes them.
 */
#ifndef SANDBOX_DOCKER_DKVOLUME_H
#define SANDBOX_DOCKER_DKVOLUME_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../src/base/err.h"
#include "dkapi.h"

/* Makes the volume `name`: a tmpfs of `bytes` (one inode per 8 KiB), its root 0755 and owned
 * by uid:gid (bytes 0: a plain volume of the local driver, on the engine's disk, its root
 * root's), with `labels` (borrowed), which must name this server and sandbox: a volume of
 * that name the engine has already is taken only when it has these labels and options. A
 * request that got no answer (cancelled, timed out) may have made it: it is then removed. 0, or
 * -1 with e saying why (e.g. "cancelled", with eng->http.cancelled set). */
int dkvolume_create(struct dkapi *eng, const char *name, uint64_t bytes, uid_t uid, gid_t gid, json_t *labels,
		    struct err *e);

/* The container's mount of the volume at target (new reference): the volume as it is, with
 * nothing of the image copied into it. */
json_t *dkvolume_mount(const char *name, const char *target);

/* Removes the volume, whatever eng's cancellation says (and leaves eng->http.cancelled as it
 * was); a volume that is gone is fine. 0, or
 * -1 with a warning logged when the engine keeps it. */
int dkvolume_remove(struct dkapi *eng, const char *name);

/* Removes every volume labelled `label`=1 for whose labels dead(labels, ctx) says true. */
void dkvolume_reap(struct dkapi *eng, const char *label, bool (*dead)(json_t *labels, void *ctx), void *ctx);

#endif
