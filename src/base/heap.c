#include "heap.h"

#include <stdlib.h> /* defines __GLIBC__ on glibc */

#ifdef __GLIBC__
#include <malloc.h>

void heap_init(void)
{
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

void heap_release(void)
{
	malloc_trim(0);
}
#else
/* Another C library keeps its own policy. */
void heap_init(void)
{
}

void heap_release(void)
{
}
#endif
