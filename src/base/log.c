#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static const char *const names[] = {"debug", "info", "notice", "warning", "error", "critical",
				    "alert", "emergency"};
static int stderr_level = LOG_INFO;
static int client_level = LOG_OFF;
static log_sink_fn client_sink;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static log_request_fn request_fn;
static void *request_ctx;
static int request_level = LOG_OFF;
static unsigned routed_in_flight;   /* lines being handed to request_fn, under lock */
static pthread_cond_t routed_done = PTHREAD_COND_INITIALIZER;
static _Thread_local bool session_thread;

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
	while (routed_in_flight)
		pthread_cond_wait(&routed_done, &lock);
	pthread_mutex_unlock(&lock);
}

void log_thread_is_session(void)
{
	session_thread = true;
}

/* A line longer than LOG_LINE_MAX: cut on a character boundary, with "…" where it was cut
 * (never inside a character, which would make the rest of the line invalid UTF-8). */
static void cut_line(char *msg)
{
	static const char mark[] = "\xe2\x80\xa6"; /* … */
	size_t end = LOG_LINE_MAX - (sizeof mark - 1);
	/* Back to the start of the character that holds byte `end`: it is cut off whole. */
	while (end > 0 && ((unsigned char)msg[end] & 0xc0) == 0x80)
		end--;
	memcpy(msg + end, mark, sizeof mark);
}

__attribute__((format(printf, 3, 0))) static void emit(int level, bool to_client, const char *fmt, va_list ap)
{
	char msg[LOG_LINE_MAX + 1];
	int full = vsnprintf(msg, sizeof msg, fmt, ap);
	if (full < 0)
		snprintf(msg, sizeof msg, "(a log line could not be formatted)");
	else if ((size_t)full >= sizeof msg)
		cut_line(msg);
	/* A line may quote what code or a client gave (a path, a name): what goes out is valid
	 * UTF-8 whatever it held, so that the client's notification can always be built. */
	size_t len = strlen(msg), clean_len = 0;
	char *clean = NULL;
	for (size_t i = 0; i < len;) {
		size_t l = utf8_char_len(msg + i, len - i);
		if (!l) {
			clean = utf8_sanitize(msg, len, &clean_len);
			break;
		}
		i += l;
	}
	const char *line = clean ? clean : msg;

	pthread_mutex_lock(&lock);
	int to_stderr = level >= stderr_level;
	bool routed = request_fn && !session_thread;
	log_sink_fn sink = to_client && !routed && level >= client_level ? client_sink : NULL;
	int rlevel = request_level == LOG_AS_CLIENT ? client_level : request_level;
	log_request_fn rfn = to_client && routed && level >= rlevel ? request_fn : NULL;
	void *rctx = request_ctx;
	if (rfn)
		routed_in_flight++;
	pthread_mutex_unlock(&lock);
	if (to_stderr)
		fprintf(stderr, "sandbox-mcp: %s: %s\n", log_level_name(level), line);
	if (sink)
		sink(level, line);
	if (rfn) {
		rfn(rctx, level, line);
		pthread_mutex_lock(&lock);
		if (--routed_in_flight == 0)
			pthread_cond_broadcast(&routed_done);
		pthread_mutex_unlock(&lock);
	}
	free(clean);
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
