/*
 * Logging. Every line goes to stderr as "sandbox-mcp: <level>: message" when its level is at
 * or above the stderr threshold (--log-level). Once the client has sent logging/setLevel,
 * lines at or above its level are also handed to the client sink (MCP notifications/message).
 * While a call runs, its lines (any thread's but the session's) go to the route the engine set
 * for it instead (log_route_request): at the level its request asked for in _meta (MCP
 * 2026-07-28) or at the client's (legacy), and only while the call runs. Thread-safe.
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

/* While a request runs: from now on, lines logged by any thread but a session thread go to
 * fn(ctx, ...) when at or above `level` (LOG_OFF: none; LOG_AS_CLIENT: the client's level, as
 * logging/setLevel set it) instead of the client sink; fn NULL returns them to the client
 * sink. fn runs on the logging thread, with no lock of this module held. Once this returns, no
 * line is on its way to the fn it replaced. */
#define LOG_AS_CLIENT (LOG_OFF + 1)
typedef void (*log_request_fn)(void *ctx, int level, const char *msg);
void log_route_request(log_request_fn fn, void *ctx, int level);

/* The calling thread serves the session, not a request (the reader): its lines always go to
 * the client sink, whatever request runs. */
void log_thread_is_session(void);

/* The longest line, in bytes: a longer one is cut on a character boundary and ends with "…".
 * Every line handed on is valid UTF-8 (an invalid byte becomes U+FFFD). */
#define LOG_LINE_MAX 2047

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like log_msg, to stderr alone: for lines about a request after which nothing may be sent to
 * the client (it was cancelled). */
void log_local(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
