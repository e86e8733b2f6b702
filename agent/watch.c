/*
 * The workspace's change watch (proto.h's AG_WATCH and AG_CHANGES): one inotify instance whose
 * watches are the folders the last AG_WATCH walked. The walk adds each folder's watch before it
 * reads the folder, so a change is either seen by the walk or queued as an event. After that,
 * whether anything changed is a look at the queue, whatever the size of the tree: what the
 * server asks after each call of a client that listed the resources.
 *
 * Everything that is not sure is "unknown" (the server walks then, as without a watch): no
 * instance (the user's inotify instances are used up), more folders than AG_WATCH_DIRS (they
 * would take the user's watches from everything else it runs), a watch refused (ENOSPC), an
 * event queue that overflowed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent.h"

/* What changes what the list says: names made, removed or moved, a file written or its size,
 * mode or times changed; not a read. */
#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | \
		    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

static struct {
	int fd;           /* the instance, -1: none */
	int top;          /* the watch of the walked folder itself */
	uint32_t dirs;    /* folders watched */
	int state;        /* AG_CHANGES_* */
	char skip[256];   /* the name at the top left out */
} w = {.fd = -1, .state = AG_CHANGES_UNKNOWN};

void watch_begin(const char *skip)
{
	if (w.fd >= 0)
		close(w.fd);
	w.fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	w.top = -1;
	w.dirs = 0;
	w.state = w.fd < 0 ? AG_CHANGES_UNKNOWN : AG_CHANGES_NONE;
	snprintf(w.skip, sizeof w.skip, "%s", skip);
}

/* The watch is of no use: unknown until the next walk. */
static void give_up(void)
{
	if (w.fd >= 0)
		close(w.fd);
	w.fd = -1;
	w.state = AG_CHANGES_UNKNOWN;
}

void watch_folder(int dfd, int top)
{
	if (w.fd < 0)
		return;
	if (++w.dirs > AG_WATCH_DIRS) {
		give_up();
		return;
	}
	/* The folder the walk holds open, not its path, which a background process could re-point
	 * between the walk's steps. */
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", dfd);
	int wd = inotify_add_watch(w.fd, p, WATCH_MASK);
	if (wd < 0) {
		give_up();
		return;
	}
	if (top)
		w.top = wd;
}

int watch_state(void)
{
	if (w.fd < 0 || w.top < 0) /* none, or the folder was not there to watch */
		return AG_CHANGES_UNKNOWN;
	if (w.state != AG_CHANGES_NONE)
		return w.state;
	/* Drain what is queued: any event but those of the name left out at the top. */
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(w.fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			give_up();
			return AG_CHANGES_UNKNOWN;
		}
		for (ssize_t at = 0; at + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev = (const void *)(buf + at);
			at += (ssize_t)sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				give_up();
				return AG_CHANGES_UNKNOWN;
			}
			if (ev->wd == w.top && ev->len && !strcmp(ev->name, w.skip))
				continue;
			w.state = AG_CHANGES_SOME;
		}
		if (w.state == AG_CHANGES_SOME)
			break;
	}
	return w.state;
}
