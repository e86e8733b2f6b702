/*
 * libFuzzer target over the whole message path: bytes in as the client would send them
 * (any number of lines, any bytes), through the line reader, the MCP dispatch, the argument
 * checks and the engine, to the bytes the writer puts on stdout. The oracle, besides the
 * sanitizers: every line written out is one valid JSON value.
 *
 * Tool calls reach a Docker backend whose engine socket does not exist, so they fail fast
 * and the fuzzer stays fast; everything before and after the sandbox runs as in the server.
 * Built and run by `make fuzz` (see doc/testing.md).
 */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/cli.h"
#include "../../src/base/config.h"
#include "../../src/engine/engine.h"
#include "../../src/base/log.h"
#include "../../src/protocol/mcp.h"
#include "../../src/protocol/reader.h"
#include "../../src/protocol/writer.h"
#include "../../src/tools/tools.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The largest input fed at once: what one pipe holds without a reader. */
#define FUZZ_INPUT_MAX 60000

static struct config C;
static struct engine *E;

/* Reads what the writer writes and checks each line; aborts (a finding) on one that is not
 * JSON. A \u0000 escape is JSON (an error may echo a client's string that holds a NUL), so
 * jansson is told to allow it. */
static void *check_output(void *arg)
{
	int fd = *(int *)arg;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		char *nl;
		while ((nl = memchr(buf, '\n', len))) {
			json_error_t je;
			json_t *v = json_loadb(buf, (size_t)(nl - buf), JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
			if (!v) {
				fprintf(stderr, "the server wrote a line that is not JSON: %s\n%.*s\n", je.text,
					(int)(nl - buf > 500 ? 500 : nl - buf), buf);
				abort();
			}
			json_decref(v);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
		}
	}
	free(buf);
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	struct err e = {""};
	setenv("DOCKER_HOST", "unix:///nonexistent/sandbox-mcp-fuzz/docker.sock", 1);
	char *args[] = {"sandbox-mcp", "--backend", "docker", "--log-level", "error", "--max-message", "32768", NULL};
	if (cli_load(&C, 7, args, &e) < 0 || tools_init(&C, &e) < 0) {
		fprintf(stderr, "fuzz-message: %s\n", e.msg);
		exit(1);
	}
	log_set_stderr_level(C.log_level);
	signal(SIGPIPE, SIG_IGN);
	static int out[2];
	pthread_t t;
	if (pipe2(out, O_CLOEXEC) < 0 || pthread_create(&t, NULL, check_output, &out[0]) != 0 ||
	    writer_start(out[1]) < 0 || engine_start(&E, &C, NULL, &e) < 0) {
		fprintf(stderr, "fuzz-message: cannot start: %s\n", e.msg);
		exit(1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_INPUT_MAX)
		size = FUZZ_INPUT_MAX;
	int in[2];
	if (pipe2(in, O_CLOEXEC) < 0)
		abort();
	if (size && write(in[1], data, size) != (ssize_t)size)
		abort();
	close(in[1]);
	struct mcp *m = mcp_new(&C, E);
	struct reader rd;
	if (!m || reader_init(&rd, in[0], C.max_message) < 0)
		abort();
	while (reader_fill(&rd) == 0 && mcp_handle_input(m, &rd) != READER_EOF)
		;
	engine_tick(E);
	reader_free(&rd);
	close(in[0]);
	mcp_free(m);
	return 0;
}
