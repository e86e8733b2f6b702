/*
 * One sandbox's Pod: its spec, hardened (kpod_spec), and its life on the API server: made,
 * waited on until it runs (one watch), given a file through exec, deleted; and the pods of
 * servers that are gone, found by their labels and deleted.
 *
 * The spec is the boundary, so everything is said in it: a non-root user (runAsNonRoot, the uid
 * and gid given), no privilege escalation, not privileged, every capability dropped, the
 * runtime's default seccomp profile, a read-only root, no service account token, no service
 * links, CPU, memory and ephemeral-storage limits (requests the same: Guaranteed where the
 * cluster allows), the workspace and /tmp memory-backed emptyDirs (tmpfs: a write past the
 * size limit meets ENOSPC, and what they hold counts as the pod's memory), or the workspace a
 * PersistentVolumeClaim (--workspace NAME), and the agent's folder an emptyDir, with size limits,
 * restartPolicy Never, activeDeadlineSeconds (so that the cluster ends a pod whose server
 * died), and labels naming the server (KPOD_LABEL*).
 */
#ifndef SANDBOX_KUBERNETES_KPOD_H
#define SANDBOX_KUBERNETES_KPOD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../src/base/err.h"
#include "kapi.h"

#define KPOD_LABEL "sandbox-mcp"                 /* "1" on every pod of ours */
#define KPOD_LABEL_PID "sandbox-mcp.pid"         /* the server's pid */
#define KPOD_LABEL_START "sandbox-mcp.starttime" /* its start time (procstart.h) */
#define KPOD_LABEL_HOST "sandbox-mcp.host"       /* its host's name, as a label value */
#define KPOD_LABEL_SANDBOX "sandbox-mcp.sandbox" /* the sandbox's id */
#define KPOD_WORKSPACE "/workspace"
#define KPOD_AGENT_DIR "/.sandbox-mcp"           /* an emptyDir for the agent's binary */
#define KPOD_AGENT_PATH KPOD_AGENT_DIR "/sandbox-agent"
/* The container's command (sh -c KPOD_STARTER): waits for the agent's binary, then becomes it.
 * A warm pool's template must run the same (kpod_check_claimed). */
#define KPOD_STARTER "until [ -x " KPOD_AGENT_PATH " ]; do sleep 0.05; done; exec " KPOD_AGENT_PATH " --stdio"
/* The label the agent-sandbox controllers put on the pods of a Sandbox made from a
 * SandboxTemplate, a warm pool's included, and keep through a claim's adoption (upstream's
 * SandboxTemplateRefHashLabel; the warm pool's own label, agents.x-k8s.io/warm-pool-sandbox, is
 * taken off when a claim adopts the pod): its value is kpod_template_hash of the template's
 * name. The server's one NetworkPolicy for its claimed pods selects them by it. */
#define KPOD_LABEL_TEMPLATE_HASH "agents.x-k8s.io/sandbox-template-ref-hash"

struct kpod_spec {
	const char *name;        /* the pod's name: a DNS label */
	const char *image;
	const char *runtime_class; /* NULL or "": the cluster's default */
	uint32_t uid;            /* the sandbox user (and group) */
	double cpus;             /* 0: no limit */
	uint64_t memory, ephemeral, workspace, tmp, agent_dir; /* bytes; 0: no limit */
	long deadline_s;         /* activeDeadlineSeconds; > 0 */
	bool stdin;              /* the command reads a stdin that pods/attach streams (stdinOnce:
	                          * it ends when the first attach does) */
	const char *const *command; /* NULL-terminated */
	const char *pid, *start, *host, *sandbox; /* the labels' values */
	const char *ws_claim;    /* NULL; or the PersistentVolumeClaim mounted at KPOD_WORKSPACE in
	                          * place of its emptyDir (the pod's fsGroup the uid,
	                          * fsGroupChangePolicy OnRootMismatch) */
};

/* The Pod (caller frees), or NULL when out of memory. */
json_t *kpod_spec(const struct kpod_spec *s);

/* A label value from s (at most 63 of [A-Za-z0-9._-], starting and ending alphanumeric). */
void kpod_label_value(const char *s, char *out, size_t n);

/* Creates the pod. 0, or -1 with e saying the API server's reason. */
int kpod_create(struct kapi *a, const char *ns, json_t *pod, struct err *e);

/* Waits until the pod runs (a watch on it, until timeout_ms). 0; or -1 with e saying why: it
 * failed or ended (the reason and message of its status), it cannot be scheduled for a
 * persistentvolumeclaim that is not there (its PodScheduled condition's message), or the time
 * ran out (its phase, and why it is not scheduled where its status says). */
int kpod_wait_running(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e);

/* Writes n bytes of data to path (in a folder the pod's user may write) in the pod, mode 0755,
 * through one exec: written whole to a temporary name, then renamed. 0, or -1 with e set. */
int kpod_put(struct kapi *a, const char *ns, const char *name, const char *path, const void *data, size_t n,
	     long timeout_ms, struct err *e);

/* Empties KPOD_WORKSPACE in the running pod, as its user, through one exec: what is in it is
 * deleted, following no symlink. 0, or -1 with e set. */
int kpod_empty_workspace(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e);

/* The PersistentVolumeClaim named name: *out the object (caller frees), or NULL where there is
 * none. 0, or -1 with e set. */
int kpod_pvc_get(struct kapi *a, const char *ns, const char *name, json_t **out, struct err *e);

/* Makes the workspace's PersistentVolumeClaim when it is not there (ReadWriteOnce, requests.storage
 * bytes, labelled app.kubernetes.io/managed-by=sandbox-mcp and never KPOD_LABEL: no reaping, no
 * shutdown, no cleanup deletes it); one that is there is used as it is. *made: whether this call
 * made it. 0, or -1 with e set. */
int kpod_pvc_ensure(struct kapi *a, const char *ns, const char *name, uint64_t bytes, bool *made, struct err *e);

/* Deletes the pod (gracePeriodSeconds 0); a pod already gone is fine; a 409 (the API server
 * busy with it) is tried again for up to timeout_ms. 0, or -1 with e set. */
int kpod_delete(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e);

/* The sandbox's NetworkPolicy (caller frees; NULL when out of memory): named as the pod,
 * labelled as it, selecting it by its sandbox label, policyTypes [Egress] and no egress rule:
 * the pod's egress denied, where the cluster's network plugin enforces NetworkPolicies. */
json_t *kpod_netpol(const struct kpod_spec *s);

/* Creates the NetworkPolicy. 0, or -1 with e saying the API server's reason; exists_ok: one of
 * that name already there (409 AlreadyExists) is KPOD_EXISTS. */
#define KPOD_EXISTS 2
int kpod_netpol_create(struct kapi *a, const char *ns, json_t *pol, bool exists_ok, struct err *e);

/* The value of KPOD_LABEL_TEMPLATE_HASH for the SandboxTemplate named tpl, as upstream's NameHash
 * writes it: its 32-bit FNV-1a in 8 lowercase hex digits, into out (9 bytes). */
void kpod_template_hash(const char *tpl, char out[9]);

/* A server's one NetworkPolicy for the pods it claims from its warm pool (caller frees; NULL
 * when out of memory): named name, labelled as the server's pods (KPOD_LABEL, its pid, start and
 * host; KPOD_LABEL_SANDBOX "pool"), selecting the pods labelled KPOD_LABEL_TEMPLATE_HASH of the
 * pool's template tpl and not KPOD_LABEL (no pod a server made), policyTypes [Egress] and no
 * egress rule. */
json_t *kpod_pool_netpol(const char *name, const char *tpl, const char *pid, const char *start, const char *host);

/* Deletes the NetworkPolicy named name; one already gone is fine. 0, or -1 with e set. */
int kpod_netpol_delete(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e);

/* Deletes the SandboxClaims (where the agent-sandbox CRDs are served), then the pods, then the
 * NetworkPolicies, labelled KPOD_LABEL=1 in ns for which gone(labels, arg) says their server
 * is gone. The number of pods deleted, or -1 with e set when they could not be listed. */
int kpod_reap(struct kapi *a, const char *ns, bool (*gone)(json_t *labels, void *arg), void *arg, struct err *e);

/* ---- A sandbox claimed from an agent-sandbox SandboxWarmPool (extensions.agents.x-k8s.io) */

#define KPOD_NO_CRDS 1

/* The name of the SandboxTemplate that warm pool `pool` keeps sandboxes of, into tpl (n
 * bytes). 0; KPOD_NO_CRDS when the API serves no agent-sandbox extensions; -1 with e set (the
 * pool is not in ns, or the API server's reason). */
int kpod_pool_template(struct kapi *a, const char *ns, const char *pool, char *tpl, size_t n, struct err *e);

/* Makes a SandboxClaim named s->name, labelled as s's pod would be, of template tpl from warm
 * pool `pool`, and waits (until timeout_ms) for it to name its Sandbox, whose pod has the
 * Sandbox's name: into pod (n bytes), checked to be a DNS subdomain. *made: whether the claim
 * was created (the caller deletes it). 0, or -1 with e set. */
int kpod_claim(struct kapi *a, const char *ns, const struct kpod_spec *s, const char *tpl, const char *pool,
	       long timeout_ms, char *pod, size_t n, bool *made, struct err *e);

/* Deletes the SandboxClaim named name (and, as its owner, the cluster its Sandbox and pod); one
 * already gone is fine. 0, or -1 with e set. */
int kpod_claim_delete(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e);

/* What the pod's status says of its container "sandbox": 1 terminated by the out-of-memory
 * killer (state.terminated.reason OOMKilled), 0 terminated otherwise (or the pod ended, or is
 * being deleted), -1 not (yet) terminated. With 0, why (n bytes) says it as the status does:
 * the pod's reason and message (Evicted: the node was low on memory), else the container's
 * terminated reason, message and exit code, else that it is being deleted; printable ASCII,
 * bounded. pod is untrusted: any shape. */
int kpod_ended(json_t *pod, char *why, size_t n);

/* The pod named name (caller frees *out), read within timeout_ms. 0, or -1 with e set. */
int kpod_get(struct kapi *a, const char *ns, const char *name, long timeout_ms, json_t **out, struct err *e);

/* Whether pod, a claimed pod's object as the cluster says it (untrusted: any shape), is
 * hardened as kpod_spec makes a pod and runs the agent as ours do: one container "sandbox"
 * running sh -c KPOD_STARTER with stdin and stdinOnce and an emptyDir at KPOD_AGENT_DIR; no init
 * or ephemeral container; runAsNonRoot with a runAsUser not 0, allowPrivilegeEscalation false,
 * not privileged, every capability dropped and none added, a RuntimeDefault or Localhost seccomp
 * profile, no unconfined AppArmor or SELinux (spc_t) profile, a memory limit, the default
 * procMount, a read-only root, automountServiceAccountToken false, no
 * volume but emptyDirs, no host namespace, no sysctls, no environment from secrets or the API;
 * runtimeClassName runtime_class when that is set; labelled KPOD_LABEL_TEMPLATE_HASH=tpl_hash
 * (the server's pool policy selects it by that: a pod it does not cover is refused) and not
 * KPOD_LABEL (a pod a server made for a sandbox of its own is some session's).
 * 0, or -1 with e naming every thing it lacks. */
int kpod_check_claimed(json_t *pod, const char *name, const char *tpl_hash, const char *runtime_class, struct err *e);

#endif
