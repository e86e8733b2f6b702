/*
 * Time for deadlines: a monotonic clock in milliseconds, and the timespec a condition variable
 * on CLOCK_MONOTONIC waits until.
 */
#ifndef SANDBOX_CLOCK_H
#define SANDBOX_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic clock in milliseconds. */
int64_t clock_ms(void);

/* Sleeps ms milliseconds (all of them, signals or not). */
void clock_sleep_ms(int64_t ms);

/* The CLOCK_MONOTONIC time deadline_ms (a clock_ms() value) as a timespec. */
struct timespec clock_at(int64_t deadline_ms);

#endif
