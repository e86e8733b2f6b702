#include "clock.h"

#include <errno.h>

int64_t clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec clock_at(int64_t deadline_ms)
{
	struct timespec ts = {(time_t)(deadline_ms / 1000), (long)(deadline_ms % 1000) * 1000000L};
	return ts;
}

void clock_sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (ms > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
