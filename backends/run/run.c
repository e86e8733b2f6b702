#include "run.h"

#include <stdlib.h>

void ws_list_free(struct ws_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	*l = (struct ws_list){0};
}

void ws_file_free(struct ws_file *f)
{
	if (f) {
		free(f->data);
		*f = (struct ws_file){0};
	}
}
