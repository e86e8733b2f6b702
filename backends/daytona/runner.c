/* The commands that run the call runner (see runner.h). */
#include "runner.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/base64.h"
#include "../../src/base/embed.h"

/* Executes the first line of stdin: the runner, base64url of its gzip (zlib's wbits 31). */
#define BOOT "import sys,zlib,base64;exec(zlib.decompress(base64.urlsafe_b64decode(sys.stdin.buffer.readline()),31))"
/* Ends the here-document: '.' is no base64url letter, so no data line can be it. */
#define DELIM ".sandbox-mcp."

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *runner_b64, *wssync_b64;
static size_t runner_b64_len, wssync_b64_len;

/* base64url (RFC 4648 section 5) of n bytes into c, as one line. */
static void add_b64url(struct buf *c, const void *d, size_t n)
{
	size_t len;
	char *s = b64_encode(d, n, &len);
	if (!s) {
		c->oom = true;
		return;
	}
	for (size_t i = 0; i < len; i++)
		s[i] = s[i] == '+' ? '-' : s[i] == '/' ? '_' : s[i];
	buf_add(c, s, len);
	buf_add(c, "\n", 1);
	free(s);
}

/* The embedded program name as one base64url line (caller frees), or NULL. */
static char *load_one(const char *name, size_t *n)
{
	size_t len;
	const unsigned char *gz = embed_find(name, &len);
	struct buf b = {0};
	if (gz)
		add_b64url(&b, gz, len);
	return gz ? buf_take(&b, n) : NULL;
}

static void load(void)
{
	runner_b64 = load_one("backends/daytona/runner.py.gz", &runner_b64_len);
	wssync_b64 = load_one("backends/daytona/wssync.py.gz", &wssync_b64_len);
}

/* w single-quoted for a POSIX shell, ' written as '\''. */
static void quote(struct buf *c, const char *w)
{
	buf_add(c, "'", 1);
	for (const char *p = w; *p; p++) {
		const char *q = strchr(p, '\'');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		buf_add(c, p, n);
		if (!q)
			break;
		buf_add(c, "'\\''", 4);
		p = q;
	}
	buf_add(c, "'", 1);
}

void runner_word(struct buf *c, const char *w)
{
	buf_add(c, " ", 1);
	quote(c, w);
}

void runner_cmd(struct buf *c, const char *python, const char *mode)
{
	quote(c, python);
	buf_str(c, " -I -S -c");
	runner_word(c, BOOT);
	buf_fmt(c, " %s", mode);
}

/* runner_end, with the workspace sync's line after the runner's when ws. */
static void end(struct buf *c, const char *tail, const struct run_file *files, size_t n, bool ws)
{
	pthread_once(&once, load);
	buf_str(c, " <<'" DELIM "'");
	if (tail)
		buf_str(c, tail);
	buf_add(c, "\n", 1);
	if (!runner_b64 || (ws && !wssync_b64))
		c->oom = true;
	else
		buf_add(c, runner_b64, runner_b64_len);
	if (ws && wssync_b64)
		buf_add(c, wssync_b64, wssync_b64_len);
	for (size_t i = 0; i < n; i++)
		add_b64url(c, files[i].data, files[i].len);
	buf_str(c, DELIM "\n");
}

void runner_end(struct buf *c, const char *tail, const struct run_file *files, size_t n)
{
	end(c, tail, files, n, false);
}

void runner_end_ws(struct buf *c, const char *tail, const struct run_file *files, size_t n)
{
	end(c, tail, files, n, true);
}
