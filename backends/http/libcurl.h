/*
 * libcurl, loaded the first time an HTTP client opens (http.c) rather than linked: a server that
 * never speaks HTTP (the local backend) never maps libcurl and the TLS, Kerberos, LDAP and SSH
 * libraries below it, which were most of its resident memory. Included instead of
 * <curl/curl.h>, it makes each curl_*() call go through the loaded library.
 */
#ifndef SANDBOX_LIBCURL_H
#define SANDBOX_LIBCURL_H

#include <stddef.h>

/* Calls go through pointers here, which the type-checking macros cannot follow. */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

/* The library's functions this client uses. */
struct libcurl {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *h);
	void (*easy_reset)(CURL *h);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
	const char *(*easy_strerror)(CURLcode c);
	char *(*easy_escape)(CURL *h, const char *s, int n);
	CURLcode (*easy_send)(CURL *h, const void *buf, size_t n, size_t *sent);
	CURLcode (*easy_recv)(CURL *h, void *buf, size_t n, size_t *got);
	void (*free)(void *p);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	curl_mime *(*mime_init)(CURL *h);
	curl_mimepart *(*mime_addpart)(curl_mime *m);
	CURLcode (*mime_name)(curl_mimepart *p, const char *name);
	CURLcode (*mime_filename)(curl_mimepart *p, const char *name);
	CURLcode (*mime_type)(curl_mimepart *p, const char *type);
	CURLcode (*mime_data)(curl_mimepart *p, const char *d, size_t n);
	void (*mime_free)(curl_mime *m);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_perform)(CURLM *m, int *running);
	CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *w, unsigned n, int ms, int *ret);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
	CURLMcode (*multi_cleanup)(CURLM *m);
};
extern struct libcurl libcurl;

/* Loads libcurl.so.4 and its functions once for the process. 0, or -1 with why (n bytes) saying
 * what failed. Thread-safe. */
int libcurl_load(char *why, size_t n);

/* curl.h defines these two as macros of themselves when it does not check types. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init (*libcurl.global_init)
#define curl_easy_init (*libcurl.easy_init)
#define curl_easy_cleanup (*libcurl.easy_cleanup)
#define curl_easy_reset (*libcurl.easy_reset)
#define curl_easy_perform (*libcurl.easy_perform)
#define curl_easy_setopt (*libcurl.easy_setopt)
#define curl_easy_getinfo (*libcurl.easy_getinfo)
#define curl_easy_strerror (*libcurl.easy_strerror)
#define curl_easy_escape (*libcurl.easy_escape)
#define curl_easy_send (*libcurl.easy_send)
#define curl_easy_recv (*libcurl.easy_recv)
#define curl_free (*libcurl.free)
#define curl_slist_append (*libcurl.slist_append)
#define curl_slist_free_all (*libcurl.slist_free_all)
#define curl_mime_init (*libcurl.mime_init)
#define curl_mime_addpart (*libcurl.mime_addpart)
#define curl_mime_name (*libcurl.mime_name)
#define curl_mime_filename (*libcurl.mime_filename)
#define curl_mime_type (*libcurl.mime_type)
#define curl_mime_data (*libcurl.mime_data)
#define curl_mime_free (*libcurl.mime_free)
#define curl_multi_init (*libcurl.multi_init)
#define curl_multi_add_handle (*libcurl.multi_add_handle)
#define curl_multi_remove_handle (*libcurl.multi_remove_handle)
#define curl_multi_perform (*libcurl.multi_perform)
#define curl_multi_poll (*libcurl.multi_poll)
#define curl_multi_info_read (*libcurl.multi_info_read)
#define curl_multi_cleanup (*libcurl.multi_cleanup)

#endif
