/*
 * The HTTP helper: the process that does a client's HTTP (http.h) with libcurl, so that the
 * server itself never maps libcurl and the libraries below it (TLS, Kerberos, LDAP, SSH...),
 * several MiB it would otherwise keep for the rest of its life. The server starts it as
 * `/proc/self/exe --http-helper`, the client's socket as fd HTTP_HELPER_FD, stdin and stdout
 * /dev/null, stderr the server's; it speaks wire.h, and ends when the client goes or once it
 * has been idle for the client's linger.
 */
#ifndef SANDBOX_HTTP_HELPER_H
#define SANDBOX_HTTP_HELPER_H

#define HTTP_HELPER_ARG "--http-helper"
#define HTTP_HELPER_FD 3
#define HTTP_HELPER_NAME "sandbox-http"   /* its name in ps (comm) */

/* The helper's main: serves HTTP_HELPER_FD until it ends. The exit status: 0, or 2 when fd
 * HTTP_HELPER_FD is not a socket (started by hand). */
int http_helper_main(void);

#endif
