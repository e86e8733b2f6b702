/*
 * Logging. Every line goes to stderr as "sandbox-mcp: <level>: message" when its level is at
 * or above the stderr threshold (--log-level). Once the client has sent logging/setLevel,
 * lines at or above its level are also handed to the client sink (MCP notifications/message).
 * A thread can also have a sink of its own for a while (the logs one request asked for).
 * Thread-safe.
 */
#ifndef SANDBOX_LOG_H
#define SANDBOX_LOG_H

enum log_level {
	LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING, LOG_ERROR, LOG_CRITICAL, LOG_ALERT, LOG_EMERGENCY,
	LOG_OFF
};

/* Level names are MCP's (RFC 5424): "debug" ... "emergency". Returns -1 for an unknown name. */
int log_level_parse(const char *name);
const char *log_level_name(int level);

void log_set_stderr_level(int level);

/* The sink gets each line the client asked for; `level` is at or above the client's level. */
typedef void (*log_sink_fn)(int level, const char *msg);
void log_set_client(log_sink_fn sink, int level);

/* From now on, lines this thread logs at or above `level` also go to fn(ctx, ...); fn NULL
 * ends it. The sink runs on the logging thread, with no lock of this module held. */
typedef void (*log_thread_fn)(void *ctx, int level, const char *msg);
void log_set_thread(log_thread_fn fn, void *ctx, int level);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
