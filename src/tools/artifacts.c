#include "artifacts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/base64.h"
#include "filekind.h"
#include "../base/utf8.h"
#include "result.h"
#include "wsuri.h"

#define CLOSING_MAX 400 /* bytes kept for the closing line */

struct cand {
	char *path;             /* relative to /workspace; owned */
	const struct ws_entry *seen; /* from the outputs/ listing, or NULL (collect) */
};

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct cand *)a)->path, ((const struct cand *)b)->path);
}

static const char *kind_of(unsigned mode)
{
	if (S_ISDIR(mode))
		return "a folder: name the files in it";
	if (S_ISFIFO(mode))
		return "a FIFO, not a regular file: not read";
	if (S_ISSOCK(mode))
		return "a socket, not a regular file: not read";
	if (S_ISLNK(mode))
		return "a symlink: not followed";
	return "not a regular file: not read";
}

static size_t cost_of(const json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = s ? strlen(s) + 1 : 0;
	free(s);
	return n;
}

/* A JSON string of a path that may hold any bytes. */
static json_t *path_string(const char *p)
{
	size_t n;
	char *c = utf8_sanitize(p, strlen(p), &n);
	json_t *j = c ? json_stringn(c, n) : NULL;
	free(c);
	return j;
}

/* One file's entry, its line and its block, as it will be shown. */
struct shown {
	json_t *entry, *block;
	char *line;
	size_t cost;
};

static void shown_free(struct shown *s)
{
	json_decref(s->entry);
	json_decref(s->block);
	free(s->line);
	memset(s, 0, sizeof *s);
}

/* A name for the text block: control bytes as C escapes (\n, \t, \xNN), so that a name
 * cannot break the block's one-line-per-file form. The entry keeps the exact path. */
static char *line_name(const char *p)
{
	char *out = malloc(strlen(p) * 4 + 1), *o = out;
	for (; out && *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '\n' || c == '\t' || c == '\r')
			o += sprintf(o, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
		else if (c < 0x20 || c == 0x7f || c == '\\')
			o += c == '\\' ? sprintf(o, "\\\\") : sprintf(o, "\\x%02x", c);
		else
			*o++ = (char)c;
	}
	if (out)
		*o = '\0';
	return out;
}

/* how: "image", "text", "base64", "link" or "none". */
static int show(struct shown *s, const char *path, const struct ws_file *f, bool have_size, const char *mime,
		const char *how, const char *note, bool links)
{
	memset(s, 0, sizeof *s);
	char *uri = wsuri_from_path(path);
	json_t *jp = path_string(path);
	if (!uri || !jp) {
		free(uri);
		json_decref(jp);
		return -1;
	}
	s->entry = json_pack("{s:o, s:s, s:o, s:o, s:s, s:o}", "path", jp, "uri", uri, "size",
			     have_size ? json_integer((json_int_t)f->size) : json_null(), "mime_type",
			     mime ? json_string(mime) : json_null(), "shown", how, "note",
			     note ? json_string(note) : json_null());
	char size[64] = "";
	if (have_size)
		snprintf(size, sizeof size, "%s%s%" PRIu64 " bytes", mime ? mime : "", mime ? ", " : "", f->size);
	char *ps = line_name(json_string_value(jp));
	size_t ll = (ps ? strlen(ps) : 0) + strlen(size) + strlen(uri) + (note ? strlen(note) : 0) + 128;
	bool text = !strcmp(how, "text");
	if (text)
		ll += f->len;
	s->line = malloc(ll);
	if (!s->entry || !s->line || !ps)
		goto oom;
	int o = snprintf(s->line, ll, "%s%s%s%s: ", ps, *size ? " (" : "", size, *size ? ")" : "");
	free(ps);
	ps = NULL;
	if (!strcmp(how, "image"))
		o += snprintf(s->line + o, ll - (size_t)o, "shown as an image");
	else if (text)
		o += snprintf(s->line + o, ll - (size_t)o, f->len ? "its text follows" : "empty");
	else if (!strcmp(how, "base64"))
		o += snprintf(s->line + o, ll - (size_t)o, "binary; its base64 is in structuredContent.artifacts");
	else if (!strcmp(how, "link"))
		o += snprintf(s->line + o, ll - (size_t)o, "%s", uri);
	if (note)
		o += snprintf(s->line + o, ll - (size_t)o, "%s%s", strcmp(how, "none") ? " (" : "", note);
	if (note && strcmp(how, "none"))
		o += snprintf(s->line + o, ll - (size_t)o, ")");
	o += snprintf(s->line + o, ll - (size_t)o, "\n");
	if (text) {
		memcpy(s->line + o, f->data, f->len);
		o += (int)f->len;
		if (f->len && f->data[f->len - 1] != '\n')
			s->line[o++] = '\n';
		s->line[o] = '\0';
		json_object_set_new(s->entry, "text", json_stringn((const char *)f->data, f->len));
	} else if (!strcmp(how, "base64")) {
		char *b = b64_encode(f->data, f->len, NULL);
		if (!b)
			goto oom;
		json_object_set_new(s->entry, "base64", json_string(b));
		free(b);
	}
	if (!strcmp(how, "image")) {
		char *b = b64_encode(f->data, f->len, NULL);
		s->block = b ? json_pack("{s:s, s:s, s:s}", "type", "image", "data", b, "mimeType", mime) : NULL;
		free(b);
		if (!s->block)
			goto oom;
	} else if (!strcmp(how, "link") && links) {
		s->block = json_pack("{s:s, s:s, s:O}", "type", "resource_link", "uri", uri, "name", jp);
		if (!s->block)
			goto oom;
		if (mime)
			json_object_set_new(s->block, "mimeType", json_string(mime));
		json_object_set_new(s->block, "size", json_integer((json_int_t)f->size));
	}
	free(uri);
	/* Image data counts apart: hosts take images beside the text budget. */
	s->cost = cost_of(s->entry) + result_json_cost(s->line, strlen(s->line)) +
		  (s->block && strcmp(how, "image") ? cost_of(s->block) : 0) + 16;
	return 0;
oom:
	free(uri);
	free(ps);
	shown_free(s);
	return -1;
}

/* Reads one candidate and decides how it is shown; inline false: never inline. */
static int present(struct sandbox *sb, const struct cand *c, bool links, bool inline_ok, int *images,
		   struct shown *s)
{
	char abs[sizeof WORKSPACE + sizeof ARTIFACTS_DIR + 4200]; /* a listed name is at most 4,095 bytes */
	snprintf(abs, sizeof abs, "%s/%s", WORKSPACE, c->path);
	/* A known large file: its first bytes tell an image; a file of unknown size is read up to
	 * the image cap. */
	size_t want = c->seen && S_ISREG(c->seen->mode) && c->seen->size > ARTIFACTS_IMAGE_MAX ? 16 : ARTIFACTS_IMAGE_MAX;
	struct ws_file f;
	struct err e = {""};
	int rc = sandbox_get(sb, abs, want, &f, &e);
	char note[sizeof e.msg + 64];
	if (rc < 0) {
		snprintf(note, sizeof note, "could not be read: %s", e.msg);
		rc = show(s, c->path, &f, false, NULL, "none", note, links);
	} else if (f.err) {
		const char *why = f.err == ENOENT   ? "no such file"
				  : f.err == ELOOP  ? "a symlink (at the path or on its way): not followed"
				  : f.err == ENOTDIR ? "a name on its way is not a folder"
						     : strerror(f.err);
		rc = show(s, c->path, &f, false, NULL, "none", why, links);
	} else if (!S_ISREG(f.mode)) {
		rc = show(s, c->path, &f, false, NULL, "none", kind_of(f.mode), links);
	} else {
		bool whole = f.len == f.size;
		const char *img = filekind_image(f.data, f.len);
		const char *mime = img ? img : filekind_by_name(c->path);
		if (!mime && whole)
			mime = filekind_is_text(f.data, f.len) ? "text/plain" : "application/octet-stream";
		if (img && whole && *images < ARTIFACTS_IMAGES) {
			(*images)++;
			rc = show(s, c->path, &f, true, mime, "image", NULL, links);
		} else if (img) {
			rc = show(s, c->path, &f, true, mime, "link",
				  whole ? "more images than one result shows (4): read it as a resource"
					: "an image over 1 MiB is not shown: read it as a resource", links);
		} else if (whole && f.size <= ARTIFACTS_INLINE_MAX && inline_ok) {
			rc = show(s, c->path, &f, true, mime, filekind_is_text(f.data, f.len) ? "text" : "base64", NULL, links);
		} else if (whole && f.size <= ARTIFACTS_INLINE_MAX) {
			rc = show(s, c->path, &f, true, mime, "link", "the result has no room to show it inline", links);
		} else {
			rc = show(s, c->path, &f, true, mime, "link", NULL, links);
		}
	}
	ws_file_free(&f);
	return rc;
}

void artifacts_free(struct artifacts *a)
{
	json_decref(a->list);
	json_decref(a->blocks);
	free(a->text);
	memset(a, 0, sizeof *a);
}

static int add_text(char **text, const char *line)
{
	size_t o = *text ? strlen(*text) : 0, n = strlen(line);
	char *t = realloc(*text, o + n + 1);
	if (!t)
		return -1;
	memcpy(t + o, line, n + 1);
	*text = t;
	return 0;
}

int artifacts_collect(struct sandbox *sb, const json_t *collect, int64_t since_ns, int changed, size_t budget,
		      bool links, struct artifacts *out)
{
	memset(out, 0, sizeof *out);
	struct ws_list ls = {0};
	struct err e = {""};
	if (since_ns > 0 && changed != 0 && sandbox_list(sb, WORKSPACE "/" ARTIFACTS_DIR, NULL, ARTIFACTS_SCAN_MAX, &ls, &e) < 0)
		ls = (struct ws_list){0}; /* the sandbox is gone: nothing to collect there */
	size_t nc = json_array_size(collect), n = 0;
	json_t *seen = NULL;
	struct cand *cs = calloc(ls.n + nc + 1, sizeof *cs);
	int rc = -1;
	if (!cs)
		goto done;
	/* A file the last call left as it is now was not changed by this one, whatever the clock
	 * says: its ctime may fall after since_ns when the two calls were within a clock tick. */
	seen = since_ns > 0 && changed != 0 ? json_object() : NULL;
	for (size_t i = 0; i < ls.n; i++) {
		char stamp[48];
		snprintf(stamp, sizeof stamp, "%lld:%llu", (long long)ls.v[i].ctime_ns, (unsigned long long)ls.v[i].size);
		const char *before = json_string_value(json_object_get(sb->outputs_seen, ls.v[i].path));
		if (seen)
			json_object_set_new(seen, ls.v[i].path, json_string(stamp));
		if (ls.v[i].ctime_ns < since_ns || (before && !strcmp(before, stamp)))
			continue;
		cs[n].seen = &ls.v[i];
		if (!(cs[n].path = malloc(strlen(ls.v[i].path) + sizeof ARTIFACTS_DIR + 1)))
			goto done;
		sprintf(cs[n++].path, "%s/%s", ARTIFACTS_DIR, ls.v[i].path);
	}
	for (size_t i = 0; i < nc; i++) {
		const char *p = json_string_value(json_array_get(collect, i));
		bool dup = false;
		for (size_t k = 0; k < n && !dup; k++)
			dup = !strcmp(cs[k].path, p);
		if (!dup && !(cs[n++].path = strdup(p)))
			goto done;
	}
	if (seen && sb->outputs_seen) {
		json_object_clear(sb->outputs_seen);
		json_object_update(sb->outputs_seen, seen);
	}
	qsort(cs, n, sizeof *cs, by_path);
	/* The first ARTIFACTS_MAX files are tried in path order; one that does not fit inline is
	 * linked, and one that does not fit even so is counted out, leaving room for the next. */
	size_t used = 0, shown = 0, tried = 0;
	int images = 0;
	for (; tried < n && tried < ARTIFACTS_MAX; tried++) {
		struct shown s;
		if (present(sb, &cs[tried], links, true, &images, &s) < 0)
			goto done;
		const char *how = json_string_value(json_object_get(s.entry, "shown"));
		bool inlined = how && (!strcmp(how, "text") || !strcmp(how, "base64"));
		if (used + s.cost + CLOSING_MAX > budget && inlined) {
			shown_free(&s);
			if (present(sb, &cs[tried], links, false, &images, &s) < 0)
				goto done;
		}
		if (used + s.cost + CLOSING_MAX > budget) {
			how = json_string_value(json_object_get(s.entry, "shown"));
			if (how && !strcmp(how, "image"))
				images--;
			shown_free(&s);
			continue;
		}
		if ((!out->list && !(out->list = json_array())) || json_array_append_new(out->list, s.entry) < 0 ||
		    add_text(&out->text, s.line) < 0) {
			s.entry = NULL;
			shown_free(&s);
			goto done;
		}
		s.entry = NULL;
		if (s.block && ((!out->blocks && !(out->blocks = json_array())) || json_array_append(out->blocks, s.block) < 0)) {
			shown_free(&s);
			goto done;
		}
		used += s.cost;
		shown++;
		shown_free(&s);
	}
	char closing[CLOSING_MAX];
	closing[0] = '\0';
	if (shown < n)
		snprintf(closing, sizeof closing, "%zu more file%s not returned (%s); resources/list lists the workspace.\n",
			 n - shown, n - shown == 1 ? " is" : "s are",
			 shown == tried ? "at most 20 per call"
			 : tried == n   ? "the result has no room for more"
					: "the result has no room for more, and at most 20 per call");
	if (ls.truncated)
		snprintf(closing + strlen(closing), sizeof closing - strlen(closing),
			 "%s holds more than %d files (or 100000 names): only part of it was looked at.\n",
			 ARTIFACTS_DIR "/", ARTIFACTS_SCAN_MAX);
	if (ls.skipped)
		snprintf(closing + strlen(closing), sizeof closing - strlen(closing),
			 "A folder in %s that is too deep (%d levels) or unreadable was not looked at.\n",
			 ARTIFACTS_DIR "/", WS_LIST_DEPTH);
	if (*closing && add_text(&out->text, closing) < 0)
		goto done;
	out->cost = used + (*closing ? result_json_cost(closing, strlen(closing)) : 0);
	rc = 0;
done:
	json_decref(seen);
	for (size_t i = 0; cs && i < n; i++)
		free(cs[i].path);
	free(cs);
	ws_list_free(&ls);
	if (rc < 0)
		artifacts_free(out);
	return rc;
}
