#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {"debug", "info", "notice", "warning", "error", "critical",
				    "alert", "emergency"};
static int stderr_level = LOG_INFO;
static int client_level = LOG_OFF;
static log_sink_fn client_sink;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local log_thread_fn thread_fn;
static _Thread_local void *thread_ctx;
static _Thread_local int thread_level;

int log_level_parse(const char *name)
{
	for (int i = 0; i < LOG_OFF; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *log_level_name(int level)
{
	return level >= 0 && level < LOG_OFF ? names[level] : "off";
}

void log_set_stderr_level(int level)
{
	pthread_mutex_lock(&lock);
	stderr_level = level;
	pthread_mutex_unlock(&lock);
}

void log_set_client(log_sink_fn sink, int level)
{
	pthread_mutex_lock(&lock);
	client_sink = sink;
	client_level = level;
	pthread_mutex_unlock(&lock);
}

void log_set_thread(log_thread_fn fn, void *ctx, int level)
{
	thread_fn = fn;
	thread_ctx = ctx;
	thread_level = level;
}

void log_msg(int level, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&lock);
	int to_stderr = level >= stderr_level;
	log_sink_fn sink = level >= client_level ? client_sink : NULL;
	pthread_mutex_unlock(&lock);
	if (to_stderr)
		fprintf(stderr, "sandbox-mcp: %s: %s\n", log_level_name(level), msg);
	if (sink)
		sink(level, msg);
	if (thread_fn && level >= thread_level)
		thread_fn(thread_ctx, level, msg);
}
