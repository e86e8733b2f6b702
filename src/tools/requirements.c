#include "requirements.h"

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A PEP 508 requirement made of a name, extras, version specifiers and a marker only. */
static bool plain(const char *q)
{
	static regex_t re;
	static bool compiled;
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&mu);
	if (!compiled)
		compiled = regcomp(&re,
				   "^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"             /* name */
				   " *(\\[ *[A-Za-z0-9._-]+( *, *[A-Za-z0-9._-]+)* *\\])?" /* extras */
				   " *((===|~=|==|!=|<=|>=|<|>) *[A-Za-z0-9.*+!_-]+"
				   "( *, *(===|~=|==|!=|<=|>=|<|>) *[A-Za-z0-9.*+!_-]+)*)?" /* versions */
				   " *(;[A-Za-z0-9 ._'\"()<>=!~,*+-]*)?$",                 /* marker */
				   REG_EXTENDED | REG_NOSUB) == 0;
	bool ok = compiled && regexec(&re, q, 0, NULL, 0) == 0;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return false;
	/* pip takes a name that ends like an archive ("x.whl", "x.tar.gz") for a file. */
	static const char *const archive[] = {".whl", ".zip", ".tar", ".tgz", ".tbz", ".txz", ".tlz",
					      ".gz", ".bz2", ".xz", ".lz", ".lzma"};
	size_t n = strcspn(q, "[ ;<>=!~");
	for (size_t i = 0; i < sizeof archive / sizeof archive[0]; i++) {
		size_t al = strlen(archive[i]);
		if (n >= al && !strncasecmp(q + n - al, archive[i], al))
			return false;
	}
	return true;
}

int req_check(const char *q, size_t n, bool online, char *why, size_t wn)
{
	if (!n || n > 300) {
		snprintf(why, wn, "a requirement is 1 to 300 characters");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)q[i];
		if (c < 0x20 || c > 0x7e) {
			snprintf(why, wn, "it contains a control, line-separator or non-ASCII character (at byte %zu): a "
					  "requirement is printable ASCII, one per array item", i);
			return -1;
		}
	}
	if (q[0] == '-') {
		snprintf(why, wn, "pip options are not requirements");
		return -1;
	}
	if (online && !plain(q)) {
		snprintf(why, wn, "when installs use the network, give package names with optional extras, versions "
				  "and markers (e.g. \"requests[socks]>=2.31\"), not URLs or paths; local wheels install "
				  "with --network none or a wheelhouse");
		return -1;
	}
	return 0;
}
