#include "embed.h"

#include <string.h>

struct embedded {
	const char *name;
	const unsigned char *start, *end;
};

/* Made by the build (build/embed_table.c). */
extern const struct embedded embedded_files[];

const unsigned char *embed_find(const char *name, size_t *len)
{
	for (const struct embedded *f = embedded_files; f->name; f++)
		if (!strcmp(f->name, name)) {
			*len = (size_t)(f->end - f->start);
			return f->start;
		}
	return NULL;
}
