/* The in-sandbox programs (see runner.h): Python files of this folder, compiled in. */
#include "runner.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/embed.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *runner, *sweep;

/* NUL-terminated copies, made once: the programs go into shell words and uploads as text. */
static char *copy_of(const char *name)
{
	size_t len;
	const unsigned char *d = embed_find(name, &len);
	char *c = d ? malloc(len + 1) : NULL;
	if (c) {
		memcpy(c, d, len);
		c[len] = '\0';
	}
	return c;
}

static void load(void)
{
	runner = copy_of("backends/daytona/runner.py");
	sweep = copy_of("backends/daytona/sweep.py");
}

const char *daytona_runner_py(void)
{
	pthread_once(&once, load);
	return runner;
}

const char *daytona_sweep_py(void)
{
	pthread_once(&once, load);
	return sweep;
}
