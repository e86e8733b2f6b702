/*
 * Where the Kubernetes API server is and who we are to it, found as the official clients find
 * them (client-go's clientcmd and rest.InClusterConfig):
 *
 *  - $KUBECONFIG when set (of a list of files, the first that exists: the files are not
 *    merged), else the pod's service account when $KUBERNETES_SERVICE_HOST is set (its token,
 *    ca.crt and namespace in sa_dir, the server https://HOST:PORT), else ~/.kube/config;
 *  - of a kubeconfig (kyaml.h): its current-context (or the context named), that context's
 *    cluster (server, certificate-authority or certificate-authority-data) and user (token or
 *    tokenFile; client-certificate(-data) with client-key(-data)); paths relative to the
 *    file's folder; the context's namespace, else "default".
 *
 * Refused, each with a line saying what to use instead: a user whose credentials come from an
 * exec plugin or an auth provider (the server runs no program and refreshes no token), basic
 * auth, insecure-skip-tls-verify, a server that is not https://, a user with no credentials,
 * a certificate without its key. Every file read is bounded (KCREDS_FILE_MAX).
 */
#ifndef SANDBOX_KUBERNETES_KCREDS_H
#define SANDBOX_KUBERNETES_KCREDS_H

#include <limits.h>
#include <stddef.h>

#include "../../src/base/err.h"

#define KCREDS_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KCREDS_FILE_MAX (1u << 20)

struct kcreds {
	char server[512];        /* https://host[:port], no trailing slash */
	char ns[254];            /* the namespace to use */
	char source[PATH_MAX + 32]; /* "in-cluster service account" or "kubeconfig PATH, context C" */
	char *ca;                /* PEM; NULL: the system's CAs. Owned */
	size_t ca_len;
	char *token;             /* bearer token; NULL when none. Owned, wiped on free */
	char *cert, *key;        /* client certificate and key, PEM; NULL when none. Owned, wiped */
	size_t cert_len, key_len;
};

/* Finds the credentials as said above; context: the kubeconfig context to use (NULL or "":
 * its current-context); sa_dir: the service account's folder (KCREDS_SA_DIR). 0, or -1 with e
 * saying why (c is then empty, safe to free). */
int kcreds_load(struct kcreds *c, const char *context, const char *sa_dir, struct err *e);

/* The same, from the kubeconfig at path alone. */
int kcreds_from_kubeconfig(struct kcreds *c, const char *path, const char *context, struct err *e);

/* Wipes the secrets and frees what c holds. Idempotent. */
void kcreds_free(struct kcreds *c);

#endif
