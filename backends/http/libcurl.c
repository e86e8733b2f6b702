#include "libcurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct libcurl libcurl;

static const struct {
	const char *name;
	size_t off;
} syms[] = {
	{"curl_global_init", offsetof(struct libcurl, global_init)},
	{"curl_easy_init", offsetof(struct libcurl, easy_init)},
	{"curl_easy_cleanup", offsetof(struct libcurl, easy_cleanup)},
	{"curl_easy_reset", offsetof(struct libcurl, easy_reset)},
	{"curl_easy_perform", offsetof(struct libcurl, easy_perform)},
	{"curl_easy_setopt", offsetof(struct libcurl, easy_setopt)},
	{"curl_easy_getinfo", offsetof(struct libcurl, easy_getinfo)},
	{"curl_easy_strerror", offsetof(struct libcurl, easy_strerror)},
	{"curl_easy_escape", offsetof(struct libcurl, easy_escape)},
	{"curl_easy_send", offsetof(struct libcurl, easy_send)},
	{"curl_easy_recv", offsetof(struct libcurl, easy_recv)},
	{"curl_free", offsetof(struct libcurl, free)},
	{"curl_slist_append", offsetof(struct libcurl, slist_append)},
	{"curl_slist_free_all", offsetof(struct libcurl, slist_free_all)},
	{"curl_mime_init", offsetof(struct libcurl, mime_init)},
	{"curl_mime_addpart", offsetof(struct libcurl, mime_addpart)},
	{"curl_mime_name", offsetof(struct libcurl, mime_name)},
	{"curl_mime_filename", offsetof(struct libcurl, mime_filename)},
	{"curl_mime_type", offsetof(struct libcurl, mime_type)},
	{"curl_mime_data", offsetof(struct libcurl, mime_data)},
	{"curl_mime_free", offsetof(struct libcurl, mime_free)},
	{"curl_multi_init", offsetof(struct libcurl, multi_init)},
	{"curl_multi_add_handle", offsetof(struct libcurl, multi_add_handle)},
	{"curl_multi_remove_handle", offsetof(struct libcurl, multi_remove_handle)},
	{"curl_multi_perform", offsetof(struct libcurl, multi_perform)},
	{"curl_multi_poll", offsetof(struct libcurl, multi_poll)},
	{"curl_multi_info_read", offsetof(struct libcurl, multi_info_read)},
	{"curl_multi_cleanup", offsetof(struct libcurl, multi_cleanup)},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failed[256] = "libcurl was not loaded"; /* why not; "" once it is */

static void load(void)
{
	/* Never closed: its functions are used until the process ends. */
	void *so = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		snprintf(failed, sizeof failed, "libcurl could not be loaded: %s", dlerror());
		return;
	}
	struct libcurl l;
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		void *f = dlsym(so, syms[i].name);
		if (!f) {
			snprintf(failed, sizeof failed, "libcurl.so.4 has no %s (libcurl 7.66 or later is needed)", syms[i].name);
			return;
		}
		memcpy((char *)&l + syms[i].off, &f, sizeof f);
	}
	libcurl = l;
	failed[0] = '\0';
}

int libcurl_load(char *why, size_t n)
{
	pthread_once(&once, load);
	if (!failed[0])
		return 0;
	snprintf(why, n, "%s", failed);
	return -1;
}
