/*
 * The process title: what `ps` shows for the server ("sandbox-mcp: idle, sandbox
 * local-1a2b3c4d"), so that whoever looks at the machine sees what each server is doing. libbsd's
 * setproctitle, which reuses the memory of argv and the environment (the environment is moved
 * first; getenv goes on working).
 */
#ifndef SANDBOX_TITLE_H
#define SANDBOX_TITLE_H

/* Once, in main, after the command line was read. */
void title_init(int argc, char **argv);

/* "sandbox-mcp: " followed by the text. A no-op before title_init. */
void title_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A child cloned to run without exec may not call title_set (not async-signal-safe): its title
 * is set just before the clone, which copies it, and the server's put back just after. */
void title_before_clone(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void title_after_clone(void);

#endif
