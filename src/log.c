#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {"debug", "info", "notice", "warning", "error", "critical",
				    "alert", "emergency"};
static int stderr_level = LOG_INFO;
static int client_level = LOG_OFF;
static log_sink_fn client_sink;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static log_request_fn request_fn;
static void *request_ctx;
static int request_level = LOG_OFF;

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

void log_route_request(log_request_fn fn, void *ctx, int level)
{
	pthread_mutex_lock(&lock);
	request_fn = fn;
	request_ctx = ctx;
	request_level = level;
	pthread_mutex_unlock(&lock);
}

__attribute__((format(printf, 3, 0))) static void emit(int level, bool to_client, const char *fmt, va_list ap)
{
	char msg[2048];
	vsnprintf(msg, sizeof msg, fmt, ap);

	pthread_mutex_lock(&lock);
	int to_stderr = level >= stderr_level;
	log_sink_fn sink = to_client && !request_fn && level >= client_level ? client_sink : NULL;
	int rlevel = request_level == LOG_AS_CLIENT ? client_level : request_level;
	log_request_fn rfn = to_client && level >= rlevel ? request_fn : NULL;
	void *rctx = request_ctx;
	pthread_mutex_unlock(&lock);
	if (to_stderr)
		fprintf(stderr, "sandbox-mcp: %s: %s\n", log_level_name(level), msg);
	if (sink)
		sink(level, msg);
	if (rfn)
		rfn(rctx, level, msg);
}

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(level, true, fmt, ap);
	va_end(ap);
}

void log_local(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(level, false, fmt, ap);
	va_end(ap);
}
