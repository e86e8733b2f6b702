/*
 * What a call hands back besides its output: every file it created or changed under
 * /workspace/outputs/ (told by the file's change time, which code cannot set, against the
 * sandbox's clock when the program started) and every path its `collect` argument names, read
 * back through the sandbox (which follows no symlink and opens nothing that can block).
 *
 * Images (PNG, JPEG, GIF, WebP, told by their first bytes) up to ARTIFACTS_IMAGE_MAX come back
 * as image content, at most ARTIFACTS_IMAGES per result; other files up to ARTIFACTS_INLINE_MAX
 * inline (text, or base64) while the budget lasts; the rest as resource_link content to
 * sandbox://workspace/PATH. Everything but image data counts against the budget, so that a
 * result stays within --result-max; what does not fit is counted in one closing line.
 */
#ifndef SANDBOX_ARTIFACTS_H
#define SANDBOX_ARTIFACTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sandbox/sandbox.h"

#define ARTIFACTS_DIR "outputs"                /* under /workspace */
#define ARTIFACTS_SCAN_MAX 1000                /* names of outputs/ looked at per call */
#define ARTIFACTS_MAX 20                       /* files returned per call */
#define ARTIFACTS_IMAGE_MAX (1u << 20)         /* bytes of one image shown */
#define ARTIFACTS_IMAGES 4                     /* images shown per result */
#define ARTIFACTS_INLINE_MAX 4096              /* bytes of one file inline */
#define ARTIFACTS_PREFETCH_MAX (64u << 10)     /* a file this small may come with the call's end */

struct artifacts {
	json_t *list;     /* structuredContent.artifacts; NULL when there are none */
	json_t *blocks;   /* content blocks after the text (image, resource_link); NULL for none */
	char *text;       /* lines for the text block; NULL for none */
	size_t cost;      /* serialized bytes of all of it but image data */
};

/*
 * Collects a finished call's files. since_ns: the sandbox's clock when the program started
 * (0: unknown, outputs/ is not looked at); changed: 0 when the sandbox saw nothing under
 * outputs/ change (it is not listed), else 1 or -1; collect: the call's argument (may be NULL); budget:
 * bytes the list, the text and the links may take; links: the client takes resource_link
 * content. Never fails the call: what cannot be read is said in its entry. 0, or -1 when out
 * of memory.
 */
int artifacts_collect(struct sandbox *sb, const json_t *collect, int64_t since_ns, int changed, size_t budget,
		      bool links, struct artifacts *out);

void artifacts_free(struct artifacts *a);

#endif
