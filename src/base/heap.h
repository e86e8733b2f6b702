/*
 * The server's heap: memory a call freed is kept for the next call while calls come, and given
 * back once the server is idle. A megabyte of output goes through several buffers on its way
 * into a result; fresh pages for each of them, faulted in and zeroed by the kernel, were a good
 * part of such a call's time.
 */
#ifndef SANDBOX_HEAP_H
#define SANDBOX_HEAP_H

/* Before any thread starts: one arena (a few threads, rarely at once), blocks up to 32 MiB from
 * it rather than from their own mappings, and no trimming when memory is freed. */
void heap_init(void);

/* Gives the memory freed since back to the system (the server is idle). */
void heap_release(void);

/* How long the writer waits, with nothing left to write, before heap_release. */
#define HEAP_IDLE_MS 500

#endif
