/* The commands that run the call runner (see runner.h). */
#include "runner.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/base64.h"
#include "../../src/base/embed.h"

/* Executes the runner that the first line of stdin names (runner_fill puts it there): "@HASH":
 * the code object kept in /tmp/.sandbox-mcp-runner-HASH, used only when its SHA-256 is HASH
 * (the code runs as the same user and may have rewritten it; then the answer is MISS, exit 3);
 * "!HASH" + base64url of its zlib: that code object, which the runner keeps there again; else
 * base64url of the runner's gzip (wbits 31), compiled here (the runner's "procs" keeps it). */
#define BOOT "import sys,os,marshal\n" \
	"def _h(b):\n" \
	" try:from _sha2 import sha256\n" \
	" except ImportError:\n" \
	"  try:from _sha256 import sha256\n" \
	"  except ImportError:from hashlib import sha256\n" \
	" return sha256(b).hexdigest()\n" \
	"_l=sys.stdin.buffer.readline().strip();_k=_l[:1];_H=_l[1:65].decode('ascii','replace')\n" \
	"_P='/tmp/.sandbox-mcp-runner-'\n" \
	"if _k==b'@':\n" \
	" try:\n" \
	"  _f=os.open(_P+_H,os.O_RDONLY|os.O_NOFOLLOW|os.O_NONBLOCK|os.O_NOCTTY|os.O_CLOEXEC)\n" \
	"  try:_b=os.read(_f,1<<20)\n" \
	"  finally:os.close(_f)\n" \
	" except OSError:_b=b''\n" \
	"elif _k==b'!':\n" \
	" import zlib,base64;_b=zlib.decompress(base64.urlsafe_b64decode(_l[65:]))\n" \
	"else:\n" \
	" import zlib,base64;_C=compile(zlib.decompress(base64.urlsafe_b64decode(_l),31),'runner','exec')\n" \
	"if _k in(b'@',b'!'):\n" \
	" if len(_H)!=64 or _h(_b)!=_H:print('" RUNNER_MISS "');sys.exit(3)\n" \
	" _C=marshal.loads(_b)\n" \
	"exec(_C)"
/* Ends the here-document: '.' is no base64url letter, so no data line can be it. */
#define DELIM ".sandbox-mcp."
/* Where the runner's line goes (runner_fill): '@' is no base64url letter either. */
#define PLACEHOLDER "@"

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

/* runner_end, with the workspace sync's line after the runner's when ws. The runner's line is
 * PLACEHOLDER until runner_fill. */
static void end(struct buf *c, const char *tail, const struct run_file *files, size_t n, bool ws)
{
	pthread_once(&once, load);
	buf_str(c, " <<'" DELIM "'");
	if (tail)
		buf_str(c, tail);
	buf_str(c, "\n" PLACEHOLDER "\n");
	if (ws && !wssync_b64)
		c->oom = true;
	if (ws && wssync_b64)
		buf_add(c, wssync_b64, wssync_b64_len);
	for (size_t i = 0; i < n; i++)
		add_b64url(c, files[i].data, files[i].len);
	buf_str(c, DELIM "\n");
}

int runner_fill(struct buf *out, const char *cmd, const struct runner_code *rc, bool full)
{
	static const char end_mark[] = "\n" DELIM "\n", ph[] = "\n" PLACEHOLDER "\n";
	size_t n = strlen(cmd), el = sizeof end_mark - 1, pl = sizeof ph - 1;
	if (n < el + pl || memcmp(cmd + n - el, end_mark, el))
		return 0;
	/* The last one: every line after it is base64url (no '@') or the delimiter. */
	const char *at = NULL;
	for (size_t i = n - el - pl + 2; i-- > 0;)
		if (!memcmp(cmd + i, ph, pl)) {
			at = cmd + i;
			break;
		}
	if (!at)
		return 0;
	pthread_once(&once, load);
	buf_add(out, cmd, (size_t)(at - cmd) + 1);
	if (rc && rc->line && full)
		buf_add(out, rc->line, rc->len);
	else if (rc && rc->line)
		buf_fmt(out, "@%s", rc->hash);
	else if (runner_b64)
		buf_add(out, runner_b64, runner_b64_len - 1); /* its '\n' follows */
	else
		out->oom = true;
	buf_str(out, at + pl - 1);
	return out->oom ? -1 : 1;
}

int runner_code_set(struct runner_code *rc, const char *answer)
{
	/* "HASH B64\n": 64 hex digits, base64url of the zlib of the code object. */
	size_t n = strlen(answer);
	while (n && (answer[n - 1] == '\n' || answer[n - 1] == '\r'))
		n--;
	if (n < 66 || n > RUNNER_CODE_MAX || answer[64] != ' ' || strspn(answer, "0123456789abcdef") != 64)
		return -1;
	const char *b = answer + 65;
	size_t bl = n - 65;
	if (strspn(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=") < bl)
		return -1;
	char *line = malloc(bl + 66);
	if (!line)
		return -1;
	line[0] = '!';
	memcpy(line + 1, answer, 64);
	memcpy(line + 65, b, bl);
	line[bl + 65] = '\0';
	runner_code_free(rc);
	memcpy(rc->hash, answer, 64);
	rc->hash[64] = '\0';
	rc->line = line;
	rc->len = bl + 65;
	return 0;
}

void runner_code_free(struct runner_code *rc)
{
	free(rc->line);
	rc->line = NULL;
	rc->len = 0;
	rc->hash[0] = '\0';
}

void runner_end(struct buf *c, const char *tail, const struct run_file *files, size_t n)
{
	end(c, tail, files, n, false);
}

void runner_end_ws(struct buf *c, const char *tail, const struct run_file *files, size_t n)
{
	end(c, tail, files, n, true);
}
