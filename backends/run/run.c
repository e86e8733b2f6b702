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

void proc_res_free(struct proc_res *r)
{
	for (size_t i = 0; r->v && i < r->n; i++)
		for (int k = 0; k < 2; k++)
			free(r->v[i].s[k].data);
	free(r->v);
	r->v = NULL;
	r->n = 0;
}
