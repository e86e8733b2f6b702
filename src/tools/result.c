#include "result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/config.h"
#include "../base/jsonw.h"
#include "../base/utf8.h"

/* Serialized size left for what the JSON-RPC envelope adds around the result. */
#define ENVELOPE 256
/* A marker's cost, at most: its text with the largest counts and a workspace path. */
#define MARKER_MAX 400
#define SHELL_OVER 64

static const char *const names[2] = {"stdout", "stderr"};

/* ---------------------------------------------------------------- costs */

/* Cost of one character (len bytes, 0 for a byte that becomes U+FFFD) as JSON string text. */
static size_t char_cost(const char *s, size_t len)
{
	if (!len)
		return 3; /* U+FFFD, written as its three bytes */
	if (len > 1)
		return len;
	unsigned char c = (unsigned char)*s;
	if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
		return 2;
	return c < 0x20 ? 6 : 1;
}

size_t result_json_cost(const char *s, size_t n)
{
	size_t cost = 0;
	for (size_t i = 0; i < n;) {
		size_t run = i + utf8_ascii_run(s + i, n - i);
		/* ASCII as jsonw counts it; the rest a character at a time. */
		cost += jsonw_string_size(s + i, run - i);
		if (run == n)
			break;
		size_t l = utf8_char_len(s + run, n - run);
		cost += char_cost(s + run, l);
		i = run + (l ? l : 1);
	}
	return cost;
}

/* Raw length of the longest prefix of s costing at most budget. */
static size_t prefix_within(const char *s, size_t n, size_t budget)
{
	size_t cost = 0, i = 0;
	while (i < n) {
		size_t l = utf8_char_len(s + i, n - i);
		size_t c = char_cost(s + i, l);
		if (cost + c > budget)
			break;
		cost += c;
		i += l ? l : 1;
	}
	return i;
}

/* Raw offset where the longest suffix of s costing at most budget starts. Leading bytes that
 * continue a character cut off before s are skipped, not shown as U+FFFD. */
static size_t suffix_within(const char *s, size_t n, size_t budget)
{
	size_t i = 0;
	while (i < 3 && i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
		i++;
	size_t total = result_json_cost(s + i, n - i);
	while (i < n && total > budget) {
		size_t l = utf8_char_len(s + i, n - i);
		total -= char_cost(s + i, l);
		i += l ? l : 1;
	}
	return i;
}

/* ---------------------------------------------------------------- text of a stream */

/* The raw bytes a stream has: all of them (a), or its head (a) and tail (b) when the capture
 * already left its middle out. */
struct pieces {
	const char *a, *b;
	size_t a_len, b_len;
	uint64_t total;
	bool gap;        /* bytes between a and b are gone */
	char *owned;     /* b, when it had to be made contiguous */
};

static int pieces_of(const struct result_stream *st, struct pieces *p)
{
	memset(p, 0, sizeof *p);
	if (!st->out) {
		p->a = st->raw ? st->raw : "";
		p->a_len = st->raw ? st->raw_len : 0;
		p->total = p->a_len;
		return 0;
	}
	struct output_view v;
	output_view(st->out, &v);
	p->a = v.head;
	p->a_len = v.head_len;
	p->total = v.total;
	if (!v.cut)
		return 0;
	p->gap = true;
	/* --output-cap keeps that many bytes of a cut stream: half of it head, half tail. */
	if (p->a_len > v.tail1_len + v.tail2_len)
		p->a_len = v.tail1_len + v.tail2_len;
	p->owned = malloc(v.tail1_len + v.tail2_len + 1);
	if (!p->owned)
		return -1;
	memcpy(p->owned, v.tail1, v.tail1_len);
	memcpy(p->owned + v.tail1_len, v.tail2, v.tail2_len);
	p->b = p->owned;
	p->b_len = v.tail1_len + v.tail2_len;
	return 0;
}

/* Appends s (n raw bytes) to buf, made valid UTF-8. */
static int append_clean(char **buf, size_t *len, const char *s, size_t n)
{
	size_t cl;
	char *clean = utf8_sanitize(s, n, &cl);
	if (!clean)
		return -1;
	if (!*buf) {
		*buf = clean;
		*len = cl;
		return 0;
	}
	char *nb = realloc(*buf, *len + cl + 1);
	if (!nb) {
		free(clean);
		return -1;
	}
	memcpy(nb + *len, clean, cl + 1);
	*buf = nb;
	*len += cl;
	free(clean);
	return 0;
}

/* The stream's text within budget (JSON cost; SIZE_MAX: no limit), whole costing `whole` (SIZE_MAX
 * when its middle is gone). *cut says whether bytes are left out. Caller frees; NULL when out of
 * memory. */
static char *stream_text(const struct pieces *p, const struct result_stream *st, size_t whole, size_t budget,
			 size_t *len, bool *cut)
{
	char *t = NULL;
	*len = 0;
	if (whole <= budget) {
		*cut = false;
		return append_clean(&t, len, p->a, p->a_len) < 0 ? NULL : t;
	}
	*cut = true;
	size_t half = budget > MARKER_MAX ? (budget - MARKER_MAX) / 2 : 0;
	size_t head = prefix_within(p->a, p->a_len, half);
	const char *tail_src = p->gap ? p->b : p->a + head;
	size_t tail_n = p->gap ? p->b_len : p->a_len - head;
	size_t tail_at = suffix_within(tail_src, tail_n, half);
	size_t tail = tail_n - tail_at;
	unsigned long long omitted = p->total - head - tail;
	char marker[MARKER_MAX];
	if (st->file)
		snprintf(marker, sizeof marker, "\n[... %llu bytes left out here; the full output is in %.200s ...]\n",
			 omitted, st->file);
	else
		snprintf(marker, sizeof marker, "\n[... %llu bytes left out here ...]\n", omitted);
	if (append_clean(&t, len, p->a, head) < 0 || append_clean(&t, len, marker, strlen(marker)) < 0 ||
	    append_clean(&t, len, tail_src + tail_at, tail) < 0) {
		free(t);
		return NULL;
	}
	return t;
}

/* ---------------------------------------------------------------- the result */

/* Appends a formatted line, made valid UTF-8: it may quote paths and messages holding anything. */
static void tb_fmt(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_fmt(struct buf *b, const char *fmt, ...)
{
	char line[1200];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	size_t cl;
	char *clean = utf8_sanitize(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, &cl);
	if (!clean) {
		b->oom = true;
		return;
	}
	buf_add(b, clean, cl);
	free(clean);
}

/* A JSON string of s, repaired to valid UTF-8; null for NULL. */
static json_t *str_or_null(const char *s)
{
	if (!s)
		return json_null();
	json_t *j = utf8_json_string(s, strlen(s));
	return j ? j : json_string("(text lost: out of memory)");
}

/* The text block: the same facts as structuredContent, in the order a model needs them. */
static char *text_block(const struct result_facts *f, char *const text[2], const size_t len[2],
			const bool cut[2], size_t *out_len)
{
	struct buf b = {0};
	char sz[32];
	buf_reserve(&b, len[0] + len[1] + 1024);
	if (f->process_id)
		tb_fmt(&b, "running: background process %s (%lld ms so far, %s sandbox %s); read, feed or signal it "
			   "with the process tool\n", f->process_id, (long long)f->duration_ms, f->backend ? f->backend : "-",
		       f->sandbox_id ? f->sandbox_id : "-");
	else if (!f->backend)
		tb_fmt(&b, "exit_code: %d (no sandbox)\n", f->exit_code);
	else
		tb_fmt(&b, "exit_code: %d (%lld ms, %s sandbox %s)\n", f->exit_code, (long long)f->duration_ms,
		       f->backend, f->sandbox_id ? f->sandbox_id : "-");
	if (f->timed_out)
		tb_fmt(&b, "timed out after %g s: every process of the call was killed\n", f->timeout_s);
	if (f->oom_killed) {
		if (f->memory_limit)
			tb_fmt(&b, "killed: out of memory: the code used the sandbox's whole memory limit (%s, --memory) "
				   "and the out-of-memory killer ended it\n",
			       config_fmt_size(f->memory_limit, sz, sizeof sz));
		else
			buf_str(&b, "killed: out of memory: the code used all the memory the sandbox has and the "
				   "out-of-memory killer ended it\n");
	}
	if (f->notice)
		tb_fmt(&b, "notice: %s\n", f->notice);
	if (f->session && f->value)
		tb_fmt(&b, "value: %s\n", f->value);
	if (f->error)
		tb_fmt(&b, "error: %s\n", f->error);
	for (int i = 0; i < 2; i++) {
		if (!len[i]) {
			tb_fmt(&b, "--- %s: empty ---\n", names[i]);
			continue;
		}
		tb_fmt(&b, "--- %s ---\n", names[i]);
		buf_add(&b, text[i], len[i]);
		if (text[i][len[i] - 1] != '\n')
			buf_str(&b, "\n");
		if (!cut[i])
			continue;
		const struct result_stream *st = &f->s[i];
		unsigned long long total = 0;
		if (st->out) {
			struct output_view v;
			output_view(st->out, &v);
			total = v.total;
		} else {
			total = st->raw_len;
		}
		if (st->file)
			tb_fmt(&b, "(%s was cut: %llu bytes in all; full text in %s)\n", names[i], total, st->file);
		else if (st->file_error)
			tb_fmt(&b, "(%s was cut: %llu bytes in all; the full text could not be saved: %s)\n", names[i], total,
			       st->file_error);
		else
			tb_fmt(&b, "(%s was cut: %llu bytes in all)\n", names[i], total);
	}
	return buf_take(&b, out_len);
}

static json_t *build(const struct result_facts *f, const struct pieces p[2], char *const text[2],
		     const size_t len[2], const bool cut[2])
{
	size_t tl = 0;
	char *tb = text_block(f, text, len, cut, &tl);
	if (!tb)
		return NULL;
	/* The texts were made valid UTF-8 (stream_text, text_block): jansson need not check again.
	 * Built member by member: json_pack's parsing of its format was a sixth of the server's
	 * own work for a small call. Any member that fails fails the whole (set_new steals). */
	json_t *sc = json_object(), *tr = json_object(), *r = json_object(), *item = json_object(), *content = json_array();
	bool ok = sc && tr && r && item && content;
	ok &= json_object_set_new_nocheck(sc, "exit_code", json_integer(f->exit_code)) == 0;
	ok &= json_object_set_new_nocheck(sc, "stdout", json_stringn_nocheck(text[0], len[0])) == 0;
	ok &= json_object_set_new_nocheck(sc, "stderr", json_stringn_nocheck(text[1], len[1])) == 0;
	ok &= json_object_set_new_nocheck(sc, "timed_out", json_boolean(f->timed_out)) == 0;
	ok &= json_object_set_new_nocheck(sc, "oom_killed", json_boolean(f->oom_killed)) == 0;
	ok &= json_object_set_new_nocheck(sc, "duration_ms", json_integer((json_int_t)f->duration_ms)) == 0;
	ok &= json_object_set_new_nocheck(tr, "stdout", json_boolean(cut[0])) == 0;
	ok &= json_object_set_new_nocheck(tr, "stderr", json_boolean(cut[1])) == 0;
	ok &= json_object_set_new_nocheck(tr, "stdout_bytes", json_integer((json_int_t)p[0].total)) == 0;
	ok &= json_object_set_new_nocheck(tr, "stderr_bytes", json_integer((json_int_t)p[1].total)) == 0;
	ok &= json_object_set_new_nocheck(tr, "stdout_file", str_or_null(cut[0] ? f->s[0].file : NULL)) == 0;
	ok &= json_object_set_new_nocheck(tr, "stderr_file", str_or_null(cut[1] ? f->s[1].file : NULL)) == 0;
	ok &= json_object_set_new_nocheck(tr, "stdout_file_error",
				  str_or_null(cut[0] && !f->s[0].file ? f->s[0].file_error : NULL)) == 0;
	ok &= json_object_set_new_nocheck(tr, "stderr_file_error",
				  str_or_null(cut[1] && !f->s[1].file ? f->s[1].file_error : NULL)) == 0;
	ok &= json_object_set_nocheck(sc, "truncated", tr) == 0;
	ok &= json_object_set_new_nocheck(sc, "backend", str_or_null(f->backend)) == 0;
	ok &= json_object_set_new_nocheck(sc, "sandbox_id", str_or_null(f->backend ? f->sandbox_id : NULL)) == 0;
	ok &= json_object_set_new_nocheck(sc, "error", str_or_null(f->error)) == 0;
	ok &= json_object_set_new_nocheck(sc, "notice", str_or_null(f->notice)) == 0;
	if (f->session) {
		ok &= json_object_set_new_nocheck(sc, "session", json_string(f->session)) == 0;
		ok &= json_object_set_new_nocheck(sc, "value", str_or_null(f->value)) == 0;
	}
	if (f->process_id) {
		ok &= json_object_set_new_nocheck(sc, "process_id", json_string(f->process_id)) == 0;
		ok &= json_object_set_new_nocheck(sc, "running", json_true()) == 0;
	}
	ok &= json_object_set_new_nocheck(item, "type", json_string("text")) == 0;
	ok &= json_object_set_new_nocheck(item, "text", json_stringn_nocheck(tb, tl)) == 0;
	ok &= json_array_append(content, item) == 0;
	ok &= json_object_set_nocheck(r, "content", content) == 0;
	ok &= json_object_set_nocheck(r, "structuredContent", sc) == 0;
	json_decref(tr);
	json_decref(item);
	json_decref(content);
	json_decref(sc);
	if (!ok) {
		json_decref(r);
		r = NULL;
	}
	free(tb);
	if (r && (f->exit_code != 0 || f->timed_out || f->error))
		json_object_set_new(r, "isError", json_true());
	return r;
}

/* Serialized size of j. */
static size_t json_size(const json_t *j)
{
	return jsonw_size(j);
}

/* At most what a string of n bytes costs in JSON, quotes included, once made valid UTF-8: an
 * invalid byte becomes U+FFFD (3 bytes), a control character \u00XX (6). */
static size_t cost_bound(const char *s)
{
	return s ? 2 + 6 * strlen(s) : 4;
}

/* At most what one line of the text block costs in JSON: tb_fmt's format (under 256 bytes
 * here) with arguments of `args` bytes, cut at 1200, each byte of which may cost 6. */
static size_t line_bound(size_t args)
{
	size_t n = 256 + args;
	return 6 * (n < 1200 ? n : 1200);
}

static size_t len_or_0(const char *s)
{
	return s ? strlen(s) : 0;
}

/* An upper bound of the serialized size of build()'s result with both streams whole (need: their
 * JSON costs), without walking it: the members' names, punctuation, numbers and literals take
 * under SKELETON bytes; the text block holds the streams, a "\n" after each, and its lines.
 * Cheaper than jsonw_size for the common result that fits many times over. */
#define SKELETON 1024
static size_t size_bound(const struct result_facts *f, const size_t need[2])
{
	size_t strings = cost_bound(f->backend) + cost_bound(f->sandbox_id) + cost_bound(f->error) +
			 cost_bound(f->notice) + cost_bound(f->session) + cost_bound(f->value) + cost_bound(f->process_id);
	size_t lines = line_bound(len_or_0(f->backend) + len_or_0(f->sandbox_id) + len_or_0(f->process_id)) +
		       2 * line_bound(0);
	if (f->session && f->value)
		lines += line_bound(strlen(f->value));
	if (f->timed_out)
		lines += line_bound(32);
	if (f->oom_killed)
		lines += line_bound(32);
	if (f->notice)
		lines += line_bound(strlen(f->notice));
	if (f->error)
		lines += line_bound(strlen(f->error));
	return SKELETON + strings + lines + 2 * (need[0] + 2 + need[1] + 2);
}

json_t *result_execution(const struct result_facts *f, size_t max, bool cut_out[2])
{
	struct pieces p[2];
	char *text[2] = {NULL, NULL};
	size_t len[2] = {0, 0};
	bool cut[2] = {false, false};
	json_t *r = NULL;
	if (max < RESULT_MIN)
		max = RESULT_MIN;
	max -= ENVELOPE;
	if (pieces_of(&f->s[0], &p[0]) < 0 || (pieces_of(&f->s[1], &p[1]) < 0 && (free(p[0].owned), 1)))
		return NULL;
	size_t need[2];
	for (int i = 0; i < 2; i++)
		need[i] = p[i].gap ? SIZE_MAX : result_json_cost(p[i].a, p[i].a_len);
	/* Most results fit whole: built whole first, and kept when the budgets worked out below
	 * would have left both streams whole too, so the result is the same with one build less.
	 * The result with empty streams (what `fixed` measures) is at most SHELL_OVER bytes longer
	 * than it (its "--- stdout: empty ---" labels). */
	if (!p[0].gap && !p[1].gap && need[0] < max / 2 && need[1] < max / 2) {
		for (int i = 0; i < 2; i++)
			if (!(text[i] = stream_text(&p[i], &f->s[i], need[i], need[i], &len[i], &cut[i])))
				goto out;
		r = build(f, p, text, len, cut);
		if (!r)
			goto out;
		size_t whole = size_bound(f, need);
		if (whole + SHELL_OVER + 2 * 2 * (MARKER_MAX + 100) + 2 * (need[0] + need[1]) > max)
			whole = json_size(r);
		if (whole + SHELL_OVER + 2 * 2 * (MARKER_MAX + 100) + 2 * (need[0] + need[1]) <= max)
			goto done;
		json_decref(r);
		r = NULL;
	}
	/* The fixed part: the result with empty streams, their cut lines and markers counted. */
	size_t fixed = 0;
	{
		char *empty[2] = {"", ""};
		size_t zero[2] = {0, 0};
		bool none[2] = {false, false};
		json_t *shell = build(f, p, empty, zero, none);
		if (!shell)
			goto out;
		fixed = json_size(shell) + 2 * 2 * (MARKER_MAX + 100);
		json_decref(shell);
	}
	/* Each stream appears twice: in the text block and in structuredContent. */
	size_t per_copy = fixed < max ? (max - fixed) / 2 : 0;
	for (int attempt = 0; attempt < 6; attempt++) {
		/* A fair split: neither stream gets less than half unless the other needs less. */
		size_t b0 = need[0] < per_copy / 2 ? need[0] : per_copy / 2;
		size_t b1 = need[1] < per_copy - b0 ? need[1] : per_copy - b0;
		b0 = need[0] < per_copy - b1 ? need[0] : per_copy - b1;
		size_t budget[2] = {b0, b1};
		for (int i = 0; i < 2; i++) {
			free(text[i]);
			text[i] = stream_text(&p[i], &f->s[i], need[i], budget[i], &len[i], &cut[i]);
			if (!text[i])
				goto out;
		}
		json_decref(r);
		r = build(f, p, text, len, cut);
		if (!r || json_size(r) <= max)
			break;
		/* Counted too little somewhere: try again with less. */
		per_copy -= per_copy / 8 + 1;
		if (attempt == 5) {
			json_decref(r);
			r = NULL;
		}
	}
done:
	if (r && cut_out) {
		cut_out[0] = cut[0];
		cut_out[1] = cut[1];
	}
out:
	for (int i = 0; i < 2; i++) {
		free(text[i]);
		free(p[i].owned);
	}
	return r;
}

json_t *result_text(const char *text, bool is_error)
{
	/* Texts may quote anything, cut inside a character: repair them so the result exists. */
	json_t *t = utf8_json_string(text, strlen(text));
	json_t *r = t ? json_pack("{s:[{s:s, s:o}]}", "content", "type", "text", "text", t) : NULL;
	if (r && is_error)
		json_object_set_new(r, "isError", json_true());
	return r;
}
