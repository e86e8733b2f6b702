/*
 * The workspace as MCP resources: resources/list names every file under /workspace (but the
 * server's own .sandbox folder) as sandbox://workspace/PATH (wsuri.h), in path order, in pages
 * of RESOURCES_PAGE; resources/read returns one file whole, as text when it is UTF-8 without
 * NUL, else as a base64 blob, up to RESOURCES_READ_MAX bytes. Both name the file's media type
 * as a tool result does (filekind_mime): the list reads the first FILEKIND_SNIFF bytes of each
 * file of its page for it. Reads follow no symlink and open
 * nothing that can block (the sandbox's get). With no sandbox made yet the list is empty.
 * Worker thread only: the engine runs these in the queue, between calls.
 */
#ifndef SANDBOX_RESOURCES_H
#define SANDBOX_RESOURCES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../sandbox/sandbox.h"

#define RESOURCES_PAGE 100
#define RESOURCES_PAGE_BYTES (64u << 10)  /* a page ends once its entries pass this */
#define RESOURCES_LIST_MAX 10000          /* files listed at most */
#define RESOURCES_READ_MAX (4u << 20)     /* bytes of one read */
/* The JSON-RPC error codes the requests answer with: the MCP spec's for an unknown resource,
 * and JSON-RPC's own. */
#define RESOURCES_NOT_FOUND (-32002)
#define RESOURCES_INVALID_PARAMS (-32602)
#define RESOURCES_INTERNAL_ERROR (-32603)

/*
 * A listing's pages. A cursor names the path of the last entry its page listed (checked, so a
 * cursor the server did not make is refused with RESOURCES_INVALID_PARAMS), and the next page
 * starts at the first path after it in sorted order. The sorted listing of the first page is
 * kept in the pager until its last page was served, a new listing starts, or the tree may have
 * changed (resources_pager_drop, after every call): a page then seeks in it, so all pages cost
 * about one walk. Without it (another server, a call in between) a page walks again and seeks.
 * So every file is listed at most once in a listing, and each file present from its first page
 * to its last is listed exactly once; a file added between pages is listed when its path sorts
 * after the cursor and the tree was walked again.
 */
struct resources_pager {
	struct ws_list ls;           /* the kept sorted listing; n == 0 and v NULL: none */
	size_t unreadable;
	uint64_t digest;             /* resources_digest of it */
	bool live;
};

/* Forgets the kept listing (memory freed). A zeroed pager holds none. */
void resources_pager_drop(struct resources_pager *p);

/* resources/list and resources/read: the result (new ref), or NULL with *code and msg (n
 * bytes) saying why. pager may be NULL (nothing kept). */
json_t *resources_list(struct sandbox *sb, struct resources_pager *pager, const json_t *params, int *code, char *msg,
		       size_t n);
/* The same, and *digest (resources_digest) of the tree it listed. */
json_t *resources_list_digest(struct sandbox *sb, struct resources_pager *pager, const json_t *params,
			      uint64_t *digest, int *code, char *msg, size_t n);

/* A cursor for "after path" (caller frees; NULL when out of memory), and back: 0 with the path
 * in out (n bytes), or -1 when s is not a cursor this server makes. */
char *resources_cursor_make(const char *path);
int resources_cursor_parse(const char *s, char *out, size_t n);
json_t *resources_read(struct sandbox *sb, const json_t *params, int *code, char *msg, size_t n);

/* A digest of the listed tree (paths, sizes, change times): it differs once the list would.
 * 0 with no sandbox. */
uint64_t resources_digest(struct sandbox *sb);

/* False when nothing under the workspace changed since it was last walked (by a listing or a
 * digest), at a cost that does not grow with the tree (sandbox_changes): the digest would be
 * the same. True when it may have, or nothing watches (a backend without a watch, a sandbox
 * made since, a tree past the watch's bounds): the digest says then. */
bool resources_maybe_changed(struct sandbox *sb);

#endif
