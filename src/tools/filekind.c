#include "filekind.h"

#include <string.h>
#include <strings.h>

#include "../base/utf8.h"

const char *filekind_image(const unsigned char *d, size_t n)
{
	if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8))
		return "image/png";
	if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
		return "image/jpeg";
	if (n >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6)))
		return "image/gif";
	if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4))
		return "image/webp";
	return NULL;
}

/* The media type the name's extension stands for, or NULL. */
static const char *by_name(const char *path)
{
	static const char *const map[][2] = {
		{"txt", "text/plain"}, {"log", "text/plain"}, {"csv", "text/csv"}, {"tsv", "text/tab-separated-values"},
		{"md", "text/markdown"}, {"html", "text/html"}, {"htm", "text/html"}, {"json", "application/json"},
		{"xml", "application/xml"}, {"yaml", "application/yaml"}, {"yml", "application/yaml"},
		{"py", "text/x-python"}, {"sh", "text/x-shellscript"}, {"svg", "image/svg+xml"},
		{"pdf", "application/pdf"}, {"zip", "application/zip"}, {"gz", "application/gzip"},
		{"png", "image/png"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"},
		{"webp", "image/webp"},
	};
	const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
	if (!dot || (slash && dot < slash))
		return NULL;
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcasecmp(dot + 1, map[i][0]))
			return map[i][1];
	return NULL;
}

bool filekind_is_text(const unsigned char *d, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t l = d[i] ? utf8_char_len((const char *)d + i, n - i) : 0;
		if (!l)
			return false;
		i += l;
	}
	return true;
}

const char *filekind_mime(const char *path, const unsigned char *d, size_t n, bool more)
{
	if (n > FILEKIND_SNIFF) {
		n = FILEKIND_SNIFF;
		more = true;
	}
	const char *t = filekind_image(d, n);
	if (t || (t = by_name(path)))
		return t;
	/* Where the bytes looked at stop inside a character, that character is left out. */
	size_t end = n;
	if (more) {
		size_t lead = n;
		while (lead > 0 && n - lead < 4 && (d[lead - 1] & 0xc0) == 0x80)
			lead--;
		if (lead > 0 && d[lead - 1] >= 0xc0 && !utf8_char_len((const char *)d + lead - 1, n - lead + 1))
			end = lead - 1;
	}
	return filekind_is_text(d, end) ? "text/plain" : "application/octet-stream";
}
