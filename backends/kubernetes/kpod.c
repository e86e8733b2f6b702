#include "kpod.h"

#include <ctype.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/clock.h"
#include "kexec.h"

void kpod_label_value(const char *s, char *out, size_t n)
{
	size_t j = 0;
	for (size_t i = 0; s[i] && j + 1 < n && j < 63; i++) {
		char c = s[i];
		out[j++] = isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' ? c : '_';
	}
	while (j && !isalnum((unsigned char)out[j - 1]))
		j--;
	size_t lead = 0;
	while (lead < j && !isalnum((unsigned char)out[lead]))
		lead++;
	memmove(out, out + lead, j - lead);
	out[j - lead] = '\0';
}

/* A quantity in bytes, as the API writes it ("1073741824"). */
static json_t *bytes(uint64_t n)
{
	char b[32];
	snprintf(b, sizeof b, "%llu", (unsigned long long)n);
	return json_string(b);
}

static json_t *empty_dir(const char *name, uint64_t size, bool memory)
{
	json_t *ed = json_object();
	if (memory)
		json_object_set_new(ed, "medium", json_string("Memory"));
	if (size)
		json_object_set_new(ed, "sizeLimit", bytes(size));
	return json_pack("{s:s, s:o}", "name", name, "emptyDir", ed);
}

json_t *kpod_spec(const struct kpod_spec *s)
{
	json_t *cmd = json_array(), *limits = json_object();
	for (size_t i = 0; s->command && s->command[i]; i++)
		json_array_append_new(cmd, json_string(s->command[i]));
	if (s->cpus > 0) {
		char c[32];
		snprintf(c, sizeof c, "%lldm", (long long)(s->cpus * 1000 + 0.5));
		json_object_set_new(limits, "cpu", json_string(c));
	}
	if (s->memory)
		json_object_set_new(limits, "memory", bytes(s->memory));
	if (s->ephemeral)
		json_object_set_new(limits, "ephemeral-storage", bytes(s->ephemeral));
	json_t *sc = json_pack("{s:b, s:I, s:I, s:b, s:b, s:b, s:{s:[s]}, s:{s:s}}", "runAsNonRoot", 1, "runAsUser",
			       (json_int_t)s->uid, "runAsGroup", (json_int_t)s->uid, "allowPrivilegeEscalation", 0,
			       "privileged", 0, "readOnlyRootFilesystem", 1, "capabilities", "drop", "ALL", "seccompProfile",
			       "type", "RuntimeDefault");
	json_t *mounts = json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "name", "workspace", "mountPath", KPOD_WORKSPACE,
				   "name", "tmp", "mountPath", "/tmp", "name", "agent", "mountPath", KPOD_AGENT_DIR);
	json_t *ws = s->ws_claim ? json_pack("{s:s, s:{s:s}}", "name", "workspace", "persistentVolumeClaim", "claimName",
					     s->ws_claim)
				 : empty_dir("workspace", s->workspace, true);
	json_t *vols = json_pack("[o, o, o]", ws, empty_dir("tmp", s->tmp, true), empty_dir("agent", s->agent_dir, false));
	char pid[64], start[64], host[64], sb[64];
	kpod_label_value(s->pid, pid, sizeof pid);
	kpod_label_value(s->start, start, sizeof start);
	kpod_label_value(s->host, host, sizeof host);
	kpod_label_value(s->sandbox, sb, sizeof sb);
	json_t *container = json_pack("{s:s, s:s, s:o, s:s, s:o, s:{s:O, s:O}, s:o}", "name", "sandbox", "image", s->image,
				      "command", cmd, "workingDir", KPOD_WORKSPACE, "securityContext", sc, "resources",
				      "limits", limits, "requests", limits, "volumeMounts", mounts);
	json_decref(limits);
	if (!container)
		return NULL;
	json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s, s:s, s:s}}, s:{s:s, s:b, s:b, s:I, s:{s:b, s:I, "
				"s:I, s:I, s:{s:s}}, s:[o], s:o}}",
				"apiVersion", "v1", "kind", "Pod", "metadata", "name", s->name, "labels", KPOD_LABEL, "1",
				KPOD_LABEL_PID, pid, KPOD_LABEL_START, start, KPOD_LABEL_HOST, host, KPOD_LABEL_SANDBOX, sb,
				"spec", "restartPolicy", "Never", "automountServiceAccountToken", 0, "enableServiceLinks", 0,
				"activeDeadlineSeconds", (json_int_t)s->deadline_s, "securityContext", "runAsNonRoot", 1,
				"runAsUser", (json_int_t)s->uid, "runAsGroup", (json_int_t)s->uid, "fsGroup",
				(json_int_t)s->uid, "seccompProfile", "type", "RuntimeDefault", "containers", container,
				"volumes", vols);
	if (pod && s->stdin) {
		json_object_set_new(container, "stdin", json_true());
		json_object_set_new(container, "stdinOnce", json_true());
	}
	/* The claim's volume is the cluster's, its owner unknown: the kubelet gives its root to the
	 * sandbox's group, once (OnRootMismatch: not every file at every start). */
	if (pod && s->ws_claim)
		json_object_set_new(json_object_get(json_object_get(pod, "spec"), "securityContext"), "fsGroupChangePolicy",
				    json_string("OnRootMismatch"));
	if (pod && s->runtime_class && *s->runtime_class)
		json_object_set_new(json_object_get(pod, "spec"), "runtimeClassName", json_string(s->runtime_class));
	return pod;
}

#define PODS "/api/v1", "pods"
#define PVCS "/api/v1", "persistentvolumeclaims"
#define NETPOLS "/apis/networking.k8s.io/v1", "networkpolicies"
#define EXT_API "/apis/extensions.agents.x-k8s.io/v1alpha1"
#define EXT_VERSION "extensions.agents.x-k8s.io/v1alpha1"
#define CLAIMS EXT_API, "sandboxclaims"
#define POOLS EXT_API, "sandboxwarmpools"

static char *obj_path(const char *api, const char *kind, const char *ns, const char *name, const char *rest)
{
	char *ens = http_escape(ns), *en = name ? http_escape(name) : NULL;
	size_t n = 96 + (ens ? strlen(ens) : 0) + (en ? strlen(en) : 0) + strlen(rest);
	char *p = ens && (!name || en) ? malloc(n) : NULL;
	if (p)
		snprintf(p, n, "%s/namespaces/%s/%s%s%s%s", api, ens, kind, en ? "/" : "", en ? en : "", rest);
	free(ens);
	free(en);
	return p;
}

static char *pods_path(const char *ns, const char *name, const char *rest)
{
	return obj_path(PODS, ns, name, rest);
}

json_t *kpod_netpol(const struct kpod_spec *s)
{
	char pid[64], start[64], host[64], sb[64];
	kpod_label_value(s->pid, pid, sizeof pid);
	kpod_label_value(s->start, start, sizeof start);
	kpod_label_value(s->host, host, sizeof host);
	kpod_label_value(s->sandbox, sb, sizeof sb);
	/* Egress in policyTypes with no egress rule: nothing goes out of the selected pods. */
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s, s:s, s:s}}, s:{s:{s:{s:s, s:s}}, s:[s]}}", "apiVersion",
			 "networking.k8s.io/v1", "kind", "NetworkPolicy", "metadata", "name", s->name, "labels", KPOD_LABEL,
			 "1", KPOD_LABEL_PID, pid, KPOD_LABEL_START, start, KPOD_LABEL_HOST, host, KPOD_LABEL_SANDBOX, sb,
			 "spec", "podSelector", "matchLabels", KPOD_LABEL, "1", KPOD_LABEL_SANDBOX, sb, "policyTypes",
			 "Egress");
}

void kpod_template_hash(const char *tpl, char out[9])
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)tpl; *p; p++)
		h = (h ^ *p) * 16777619u;
	snprintf(out, 9, "%08x", (unsigned)h);
}

json_t *kpod_pool_netpol(const char *name, const char *tpl, const char *pid, const char *start, const char *host)
{
	char lpid[64], lstart[64], lhost[64], hash[9];
	kpod_label_value(pid, lpid, sizeof lpid);
	kpod_label_value(start, lstart, sizeof lstart);
	kpod_label_value(host, lhost, sizeof lhost);
	kpod_template_hash(tpl, hash);
	/* Egress in policyTypes with no egress rule: nothing goes out of the selected pods. */
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s, s:s, s:s}}, s:{s:{s:{s:s}, s:[{s:s, s:s}]}, s:[s]}}",
			 "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy", "metadata", "name", name, "labels",
			 KPOD_LABEL, "1", KPOD_LABEL_PID, lpid, KPOD_LABEL_START, lstart, KPOD_LABEL_HOST, lhost,
			 KPOD_LABEL_SANDBOX, "pool", "spec", "podSelector", "matchLabels", KPOD_LABEL_TEMPLATE_HASH, hash,
			 "matchExpressions", "key", KPOD_LABEL, "operator", "DoesNotExist", "policyTypes", "Egress");
}

int kpod_netpol_create(struct kapi *a, const char *ns, json_t *pol, bool exists_ok, struct err *e)
{
	char *path = obj_path(NETPOLS, ns, NULL, "");
	struct http_resp rs = {0};
	int rc = path ? kapi_call(a, "POST", path, pol, 30000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	if (rc == 0 && rs.status == 409 && exists_ok)
		rc = KPOD_EXISTS;
	else if (rc == 0 && rs.status != 201 && rs.status != 200)
		rc = kapi_fail(&rs, "creating the pod's NetworkPolicy", e);
	http_resp_free(&rs);
	free(path);
	return rc;
}

int kpod_create(struct kapi *a, const char *ns, json_t *pod, struct err *e)
{
	char *path = pods_path(ns, NULL, "");
	struct http_resp rs = {0};
	int rc = path ? kapi_call(a, "POST", path, pod, 30000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	if (rc == 0 && rs.status != 201 && rs.status != 200)
		rc = kapi_fail(&rs, "creating the pod", e);
	http_resp_free(&rs);
	free(path);
	return rc;
}

/* What a watch on one pod saw: its last phase and why it stopped. */
struct watch {
	char line[1 << 16];      /* the event being read (events are single lines) */
	size_t len;
	bool overflow;
	int state;               /* 0 on, 1 running, -1 ended */
	char phase[32], why[400];
	char sched[352];         /* why it is not scheduled, or "" */
};

/* A Pending pod's PodScheduled condition, when False: kept for the time-out's message; a claim
 * that does not exist (the volume binder's "persistentvolumeclaim \"NAME\" not found") ends the
 * wait at once, for this server made the claim before the pod: it was deleted since. */
static void watch_unscheduled(struct watch *w, json_t *st)
{
	json_t *c;
	size_t i;
	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *status = json_string_value(json_object_get(c, "status"));
		if (!type || strcmp(type, "PodScheduled") || !status || strcmp(status, "False"))
			continue;
		const char *r = json_string_value(json_object_get(c, "reason"));
		const char *m = json_string_value(json_object_get(c, "message"));
		snprintf(w->sched, sizeof w->sched, "%.40s: %.300s", r ? r : "not scheduled", m ? m : "no message");
		if (m && strstr(m, "persistentvolumeclaim") && strstr(m, "not found")) {
			snprintf(w->why, sizeof w->why, "the pod cannot be scheduled (%.340s)", w->sched);
			w->state = -1;
		}
	}
}

static void watch_event(struct watch *w, const char *p, size_t n)
{
	json_t *ev = json_loadb(p, n, 0, NULL), *obj = json_object_get(ev, "object");
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *st = json_object_get(obj, "status");
	const char *phase = json_string_value(json_object_get(st, "phase"));
	if (type && !strcmp(type, "ERROR")) {
		snprintf(w->why, sizeof w->why, "the watch ended: %.300s",
			 json_string_value(json_object_get(obj, "message")) ?: "no message");
		w->state = w->state ? w->state : -2;
	} else if (type && !strcmp(type, "DELETED")) {
		snprintf(w->why, sizeof w->why, "the pod was deleted");
		w->state = -1;
	} else if (phase) {
		snprintf(w->phase, sizeof w->phase, "%s", phase);
		if (!strcmp(phase, "Pending"))
			watch_unscheduled(w, st);
		if (!strcmp(phase, "Running"))
			w->state = 1;
		else if (!strcmp(phase, "Failed") || !strcmp(phase, "Succeeded")) {
			const char *r = json_string_value(json_object_get(st, "reason"));
			const char *m = json_string_value(json_object_get(st, "message"));
			snprintf(w->why, sizeof w->why, "the pod %s%s%s%s%.300s", phase == NULL ? "" : !strcmp(phase, "Failed") ? "failed" : "ended",
				 r ? " (" : "", r ? r : "", r ? "): " : "", m ? m : "");
			w->state = -1;
		}
	}
	json_decref(ev);
}

static size_t on_watch(const char *p, size_t n, void *ctx)
{
	struct watch *w = ctx;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			if (!w->overflow && w->len)
				watch_event(w, w->line, w->len);
			w->len = 0;
			w->overflow = false;
			if (w->state)
				return 0; /* seen what was waited for: the watch ends here */
		} else if (w->len < sizeof w->line) {
			w->line[w->len++] = p[i];
		} else {
			w->overflow = true;
		}
	}
	return n;
}

int kpod_wait_running(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e)
{
	int64_t deadline = clock_ms() + timeout_ms;
	struct watch *w = calloc(1, sizeof *w);
	if (!w)
		return err_set(e, "out of memory");
	int rc = -1;
	/* A watch that ends early (the server's timeout, a proxy's) is made again, within the time. */
	for (int tries = 0; tries < 20; tries++) {
		int64_t left = deadline - clock_ms();
		if (left <= 0)
			break;
		char *ename = http_escape(name), rest[400];
		snprintf(rest, sizeof rest, "?watch=1&fieldSelector=metadata.name%%3D%s&timeoutSeconds=%lld", ename ? ename : "",
			 (long long)((left + 999) / 1000));
		free(ename);
		char *path = pods_path(ns, NULL, rest);
		struct http_resp rs = {0};
		struct err we = {""};
		w->len = 0;
		w->overflow = false;
		int r = path ? kapi_call(a, "GET", path, NULL, (long)left, on_watch, w, &rs, &we) : err_set(&we, "out of memory");
		free(path);
		if (w->state == 1) {
			rc = 0;
		} else if (w->state == -1) {
			rc = err_set(e, "%s", w->why);
		} else if (r == 0 && rs.status != 200) {
			rc = kapi_fail(&rs, "watching the pod", e);
		} else if (r < 0 && clock_ms() < deadline && !strstr(we.msg, "cancelled")) {
			/* The watch broke: once more, a moment later. */
			poll(NULL, 0, 100);
			http_resp_free(&rs);
			continue;
		}
		http_resp_free(&rs);
		if (w->state || rc == 0 || e->msg[0])
			break;
		if (r < 0) {
			rc = err_set(e, "watching the pod: %s", we.msg);
			break;
		}
		w->state = 0;
	}
	if (rc < 0 && !e->msg[0])
		err_set(e, "the pod did not run within %ld s (phase %s%s%s)", timeout_ms / 1000, w->phase[0] ? w->phase : "unknown",
			w->sched[0] ? ", " : "", w->sched);
	free(w);
	return rc;
}

/* cause's message (cause may be e) into e, led by "WHAT in the pod: ". Returns -1. */
static int in_pod(const struct err *cause, const char *what, struct err *e)
{
	char said[sizeof cause->msg];
	snprintf(said, sizeof said, "%s", cause->msg);
	err_clear(e);
	return err_set(e, "%s in the pod: %.300s", what, said);
}

/* How long a stream whose send failed is read for its status. */
#define SENT_FAILED_WAIT_MS 10000

/* Runs argv (n words) in the pod through one exec, stdin the n bytes of data when data is not
 * NULL, and waits for its status, all by timeout_ms. what names it in e. 0, or -1 with e set. */
static int exec_run(struct kapi *a, const char *ns, const char *name, const char *const *argv, size_t argc,
		    const void *data, size_t n, const char *what, long timeout_ms, struct err *e)
{
	char *p = kexec_exec_path(ns, name, NULL, argv, argc, data != NULL);
	struct kexec x;
	kexec_init(&x);
	int rc = p ? kexec_open(&x, &a->creds, p, timeout_ms, e) : err_set(e, "out of memory");
	free(p);
	/* Every byte is taken by the deadline, or the exec fails: a server that stops reading does
	 * not hold it longer. */
	int64_t deadline = clock_ms() + timeout_ms;
	x.send_deadline = deadline;
	/* In pieces: each a message of its own, well within any server's bound. A command that
	 * ends before it reads its input (a path it cannot write) closes the stream under the
	 * send: what the stream said, its status first, is still read and told. */
	struct err sent = {""};
	bool send_failed = false;
	for (size_t off = 0; data && rc == 0 && !send_failed && off < n; off += 1 << 20)
		send_failed = kexec_send(&x, KEXEC_STDIN, (const char *)data + off,
					 n - off < (1u << 20) ? n - off : 1u << 20, &sent) < 0;
	if (data && rc == 0 && !send_failed)
		send_failed = kexec_close_stdin(&x, &sent) < 0;
	/* A stream that failed under the send has its status there already, or soon: a failure
	 * that left the stream open (the command still waits for its input) is told within
	 * SENT_FAILED_WAIT_MS, not at the exec's whole timeout. */
	if (send_failed && deadline > clock_ms() + SENT_FAILED_WAIT_MS)
		deadline = clock_ms() + SENT_FAILED_WAIT_MS;
	int code = -1;
	char why[300] = "the stream ended without a status", errs[300] = "";
	size_t el = 0;
	while (rc == 0 && code < 0) {
		unsigned ch;
		const unsigned char *m;
		size_t ml;
		int64_t left = deadline - clock_ms();
		int r = left > 0 ? kexec_recv(&x, (int)left, &ch, &m, &ml, e) : KEXEC_TIMEOUT;
		if (r < 0 && r != KEXEC_TIMEOUT) {
			/* Named as a failed send is: a pong that the server did not take fails here. */
			rc = in_pod(send_failed ? &sent : e, what, e);
			break;
		}
		if (r <= 0 && send_failed) {
			/* No status after a failed send: the send's failure is the cause. */
			rc = in_pod(&sent, what, e);
			break;
		}
		if (r <= 0) {
			rc = r == KEXEC_TIMEOUT ? err_set(e, "%s in the pod took over %ld ms", what, timeout_ms)
					     : err_set(e, "%s in the pod: %s", what, why);
			break;
		}
		if (ch == KEXEC_STDERR && el + 1 < sizeof errs) {
			size_t k = ml < sizeof errs - 1 - el ? ml : sizeof errs - 1 - el;
			memcpy(errs + el, m, k);
			el += k;
			errs[el] = '\0';
		} else if (ch == KEXEC_STATUS) {
			code = kexec_exit_code(m, ml, why, sizeof why);
			if (code != 0)
				rc = err_set(e, "%s in the pod failed (%s)%s%.200s", what, code > 0 ? "exit status" : why,
					     el ? ": " : "", errs);
			else if (send_failed)
				/* It ended well without all its input: not what was asked. */
				rc = in_pod(&sent, what, e);
		}
	}
	kexec_close(&x);
	return rc;
}

int kpod_put(struct kapi *a, const char *ns, const char *name, const char *path, const void *data, size_t n,
	     long timeout_ms, struct err *e)
{
	/* head -c, not cat: under v4 nothing closes the command's stdin. The path comes as an
	 * argument, never in the script's text. */
	char count[32], what[300];
	snprintf(count, sizeof count, "%zu", n);
	snprintf(what, sizeof what, "writing %.200s", path);
	const char *argv[] = {"sh", "-c",
			      "umask 077 && head -c \"$1\" > \"$2.part\" && [ \"$(wc -c < \"$2.part\")\" -eq \"$1\" ] && "
			      "chmod 0755 \"$2.part\" && mv -f \"$2.part\" \"$2\"",
			      "sh", count, path};
	return exec_run(a, ns, name, argv, sizeof argv / sizeof argv[0], data ? data : "", n, what, timeout_ms, e);
}

int kpod_empty_workspace(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e)
{
	/* As the pod's user, in the pod: what the code made there is the code's to see, never the
	 * server's. Folders it made unwritable are made writable first; chmod -R and find follow no
	 * symlink, open no FIFO, and -xdev keeps find on the workspace's own file system. */
	static const char *const argv[] = {"sh", "-c",
					   "cd " KPOD_WORKSPACE " && { chmod -R u+rwx . 2>/dev/null; "
					   "find . -xdev -mindepth 1 -delete; }"};
	return exec_run(a, ns, name, argv, sizeof argv / sizeof argv[0], NULL, 0, "emptying " KPOD_WORKSPACE, timeout_ms,
			e);
}

static int delete_obj(struct kapi *a, char *path, const char *what, long timeout_ms, struct err *e)
{
	int64_t deadline = clock_ms() + timeout_ms;
	if (!path)
		return err_set(e, "out of memory");
	int rc;
	for (;;) {
		struct http_resp rs = {0};
		rc = kapi_call(a, "DELETE", path, NULL, 15000, NULL, NULL, &rs, e);
		if (rc == 0 && rs.status == 409 && clock_ms() + 200 < deadline) {
			http_resp_free(&rs);
			poll(NULL, 0, 200);
			continue;
		}
		if (rc == 0 && rs.status != 200 && rs.status != 202 && rs.status != 404)
			rc = kapi_fail(&rs, what, e);
		http_resp_free(&rs);
		break;
	}
	free(path);
	return rc;
}

int kpod_delete(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e)
{
	return delete_obj(a, pods_path(ns, name, "?gracePeriodSeconds=0"), "deleting the pod", timeout_ms, e);
}

int kpod_netpol_delete(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e)
{
	return delete_obj(a, obj_path(NETPOLS, ns, name, ""), "deleting the pod's NetworkPolicy", timeout_ms, e);
}

/* Deletes the objects of kind labelled KPOD_LABEL=1 whose server is gone. The number, or -1. */
static int reap(struct kapi *a, const char *api, const char *kind, const char *ns,
		int (*del)(struct kapi *, const char *, const char *, long, struct err *),
		bool (*gone)(json_t *labels, void *arg), void *arg, struct err *e)
{
	char *path = obj_path(api, kind, ns, NULL, "?labelSelector=" KPOD_LABEL "%3D1");
	struct http_resp rs = {0};
	int rc = path ? kapi_call(a, "GET", path, NULL, 15000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	free(path);
	if (rc == 0 && rs.status != 200)
		rc = kapi_fail(&rs, "listing the objects of ours", e);
	json_t *items = json_object_get(rs.json, "items"), *it;
	size_t i;
	int n = 0;
	json_array_foreach(rc == 0 ? items : NULL, i, it) {
		json_t *md = json_object_get(it, "metadata");
		const char *name = json_string_value(json_object_get(md, "name"));
		struct err de = {""};
		if (name && gone(json_object_get(md, "labels"), arg) && del(a, ns, name, 5000, &de) == 0)
			n++;
	}
	http_resp_free(&rs);
	return rc < 0 ? -1 : n;
}

int kpod_reap(struct kapi *a, const char *ns, bool (*gone)(json_t *labels, void *arg), void *arg, struct err *e)
{
	/* The claims first: a Sandbox whose pod went would make it again. Without the CRDs the list
	 * is a 404, and nothing more. */
	struct err ce = {""};
	reap(a, CLAIMS, ns, kpod_claim_delete, gone, arg, &ce);
	int n = reap(a, PODS, ns, kpod_delete, gone, arg, e);
	struct err ne = {""};
	reap(a, NETPOLS, ns, kpod_netpol_delete, gone, arg, &ne);
	return n;
}

/* ---------------------------------------------------------------- the workspace's claim */

int kpod_pvc_get(struct kapi *a, const char *ns, const char *name, json_t **out, struct err *e)
{
	char *path = obj_path(PVCS, ns, name, "");
	struct http_resp rs = {0};
	*out = NULL;
	int rc = path ? kapi_call(a, "GET", path, NULL, 15000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	free(path);
	if (rc == 0 && rs.status == 200 && json_is_object(rs.json))
		*out = json_incref(rs.json);
	else if (rc == 0 && rs.status == 200)
		rc = err_set(e, "reading the workspace's claim: the answer is not an object");
	else if (rc == 0 && rs.status != 404)
		rc = kapi_fail(&rs, "reading the workspace's claim", e);
	http_resp_free(&rs);
	return rc;
}

int kpod_pvc_ensure(struct kapi *a, const char *ns, const char *name, uint64_t size, bool *made, struct err *e)
{
	*made = false;
	json_t *pvc = NULL;
	if (kpod_pvc_get(a, ns, name, &pvc, e) < 0)
		return -1;
	if (pvc) {
		json_decref(pvc);
		return 0; /* used as it is */
	}
	/* Labelled as ours, but not KPOD_LABEL: reaping never selects it. */
	json_t *body = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{s:[s], s:{s:{s:o}}}}", "apiVersion", "v1", "kind",
				 "PersistentVolumeClaim", "metadata", "name", name, "labels", "app.kubernetes.io/managed-by",
				 "sandbox-mcp", "app.kubernetes.io/component", "workspace", "spec", "accessModes",
				 "ReadWriteOnce", "resources", "requests", "storage", bytes(size));
	char *path = obj_path(PVCS, ns, NULL, "");
	struct http_resp rs = {0};
	int rc = body && path ? kapi_call(a, "POST", path, body, 30000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	json_decref(body);
	free(path);
	if (rc == 0 && (rs.status == 201 || rs.status == 200))
		*made = true;
	else if (rc == 0 && rs.status != 409) /* 409: made meanwhile by another: that one is used */
		rc = kapi_fail(&rs, "creating the workspace's claim", e);
	http_resp_free(&rs);
	return rc;
}

/* ---------------------------------------------------------------- warm pool claims */

/* A DNS-1123 subdomain, as the API's object names are: what a path may be made of. */
static bool dns_name(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;
	if (!n || n > max || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

int kpod_pool_template(struct kapi *a, const char *ns, const char *pool, char *tpl, size_t n, struct err *e)
{
	char *path = obj_path(POOLS, ns, pool, "");
	struct http_resp rs = {0};
	int rc = path ? kapi_call(a, "GET", path, NULL, 15000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	free(path);
	if (rc == 0 && rs.status == 404 && !json_object_get(json_object_get(rs.json, "details"), "name")) {
		/* No such resource at all (a Status without details, or "404 page not found"): the
		 * CRDs are not there. */
		rc = KPOD_NO_CRDS;
	} else if (rc == 0 && rs.status == 404) {
		rc = err_set(e, "the warm pool %s (--kube-warm-pool) is not in namespace %s", pool, ns);
	} else if (rc == 0 && rs.status != 200) {
		rc = kapi_fail(&rs, "reading the warm pool", e);
	} else if (rc == 0) {
		const char *t = json_string_value(
			json_object_get(json_object_get(json_object_get(rs.json, "spec"), "sandboxTemplateRef"), "name"));
		if (!dns_name(t, 253) || strlen(t) >= n)
			rc = err_set(e, "the warm pool %s names no SandboxTemplate (spec.sandboxTemplateRef.name)", pool);
		else
			snprintf(tpl, n, "%s", t);
	}
	http_resp_free(&rs);
	return rc;
}

/* The claim's Sandbox, from its status: 1 with pod set, 0 when not yet named, -1 (e) when what
 * it names is not a name. */
static int claim_bound(json_t *claim, char *pod, size_t n, struct err *e)
{
	json_t *sb = json_object_get(json_object_get(claim, "status"), "sandbox");
	const char *name = json_string_value(json_object_get(sb, "name"));
	if (!name || !*name)
		return 0;
	if (!dns_name(name, 253) || strlen(name) >= n)
		return err_set(e, "the claim names a Sandbox that is not a name (%.80s)", name);
	snprintf(pod, n, "%s", name);
	return 1;
}

int kpod_claim(struct kapi *a, const char *ns, const struct kpod_spec *s, const char *tpl, const char *pool,
	       long timeout_ms, char *pod, size_t n, bool *made, struct err *e)
{
	int64_t deadline = clock_ms() + timeout_ms;
	char pid[64], start[64], host[64], sb[64];
	kpod_label_value(s->pid, pid, sizeof pid);
	kpod_label_value(s->start, start, sizeof start);
	kpod_label_value(s->host, host, sizeof host);
	kpod_label_value(s->sandbox, sb, sizeof sb);
	json_t *body = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s, s:s, s:s}}, s:{s:{s:s}, s:s}}", "apiVersion",
				 EXT_VERSION, "kind", "SandboxClaim", "metadata", "name", s->name, "labels", KPOD_LABEL, "1",
				 KPOD_LABEL_PID, pid, KPOD_LABEL_START, start, KPOD_LABEL_HOST, host, KPOD_LABEL_SANDBOX, sb,
				 "spec", "sandboxTemplateRef", "name", tpl, "warmpool", pool);
	char *path = obj_path(CLAIMS, ns, NULL, "");
	struct http_resp rs = {0};
	int rc = body && path ? kapi_call(a, "POST", path, body, 30000, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	json_decref(body);
	free(path);
	if (rc == 0 && rs.status != 201 && rs.status != 200)
		rc = kapi_fail(&rs, "claiming a sandbox from the warm pool", e);
	if (rc == 0)
		*made = true;
	int bound = rc == 0 ? claim_bound(rs.json, pod, n, e) : -1;
	http_resp_free(&rs);
	/* A controller binds the claim after it is made: its status is read again until it names
	 * the Sandbox. */
	path = bound == 0 ? obj_path(CLAIMS, ns, s->name, "") : NULL;
	for (unsigned wait = 50; bound == 0;) {
		if (!path)
			return err_set(e, "out of memory");
		if (clock_ms() + wait >= deadline) {
			bound = err_set(e, "the claim was not bound to a sandbox within %ld s", timeout_ms / 1000);
			break;
		}
		poll(NULL, 0, (int)wait);
		wait = wait < 800 ? wait * 2 : 1000;
		if (kapi_call(a, "GET", path, NULL, 15000, NULL, NULL, &rs, e) < 0)
			bound = -1;
		else if (rs.status != 200)
			bound = kapi_fail(&rs, "reading the claim", e);
		else
			bound = claim_bound(rs.json, pod, n, e);
		http_resp_free(&rs);
	}
	free(path);
	return bound == 1 ? 0 : -1;
}

int kpod_claim_delete(struct kapi *a, const char *ns, const char *name, long timeout_ms, struct err *e)
{
	return delete_obj(a, obj_path(CLAIMS, ns, name, ""), "deleting the sandbox's claim", timeout_ms, e);
}

int kpod_get(struct kapi *a, const char *ns, const char *name, long timeout_ms, json_t **out, struct err *e)
{
	char *path = pods_path(ns, name, "");
	struct http_resp rs = {0};
	int rc = path ? kapi_call(a, "GET", path, NULL, timeout_ms, NULL, NULL, &rs, e) : err_set(e, "out of memory");
	free(path);
	if (rc == 0 && rs.status != 200)
		rc = kapi_fail(&rs, "reading the pod", e);
	if (rc == 0 && !json_is_object(rs.json))
		rc = err_set(e, "reading the pod: the answer is not an object");
	if (rc == 0)
		*out = json_incref(rs.json);
	http_resp_free(&rs);
	return rc;
}

static bool str_is(json_t *v, const char *s)
{
	return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* A string of the status, for a message: printable ASCII only, at most 300 bytes. */
static void printable(json_t *v, char *out, size_t n)
{
	const char *s = json_string_value(v);
	size_t j = 0;
	for (size_t i = 0; s && s[i] && j + 1 < n && i < 300; i++)
		out[j++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[j] = '\0';
}

int kpod_ended(json_t *pod, char *why, size_t n)
{
	json_t *st = json_object_get(pod, "status"), *cs;
	char r[320], m[320];
	if (n)
		why[0] = '\0';
	int term = -1;
	size_t i;
	json_array_foreach(json_object_get(st, "containerStatuses"), i, cs) {
		if (!str_is(json_object_get(cs, "name"), "sandbox"))
			continue;
		json_t *t = json_object_get(json_object_get(cs, "state"), "terminated");
		if (!t)
			break;
		if (str_is(json_object_get(t, "reason"), "OOMKilled"))
			return 1;
		printable(json_object_get(t, "reason"), r, sizeof r);
		printable(json_object_get(t, "message"), m, sizeof m);
		json_t *code = json_object_get(t, "exitCode");
		snprintf(why, n, "its container terminated%s%s%s%s, exit code %lld", r[0] ? ": " : "", r, m[0] ? ": " : "", m,
			 json_is_integer(code) ? (long long)json_integer_value(code) : -1LL);
		term = 0;
	}
	json_t *phase = json_object_get(st, "phase");
	bool ended = str_is(phase, "Failed") || str_is(phase, "Succeeded");
	printable(json_object_get(st, "reason"), r, sizeof r);
	printable(json_object_get(st, "message"), m, sizeof m);
	/* The pod's own reason says more than its container's (an eviction terminates the container
	 * as ContainerStatusUnknown). */
	if (ended && r[0])
		snprintf(why, n, "the pod %s: %s%s%s", str_is(phase, "Failed") ? "failed" : "ended", r, m[0] ? ": " : "", m);
	else if (ended && term < 0)
		snprintf(why, n, "the pod %s", str_is(phase, "Failed") ? "failed" : "ended");
	if (ended || term == 0)
		return 0;
	if (json_is_string(json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))) {
		snprintf(why, n, "the pod is being deleted (not by this server)");
		return 0;
	}
	return -1;
}

__attribute__((format(printf, 3, 4))) static void lack(char *out, size_t n, const char *fmt, ...)
{
	size_t l = strlen(out);
	if (l + 2 >= n)
		return;
	if (l)
		l += (size_t)snprintf(out + l, n - l, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out + l, n - l, fmt, ap);
	va_end(ap);
}

/* The container's field k, else the pod's (securityContext's inheritance). Borrowed. */
static json_t *sc_field(json_t *csc, json_t *psc, const char *k)
{
	json_t *v = json_object_get(csc, k);
	return v ? v : json_object_get(psc, k);
}

int kpod_check_claimed(json_t *pod, const char *name, const char *tpl_hash, const char *runtime_class, struct err *e)
{
	char miss[900] = "";
	json_t *spec = json_object_get(pod, "spec"), *cs = json_object_get(spec, "containers");
	json_t *c = json_array_size(cs) == 1 ? json_array_get(cs, 0) : NULL;
	if (!c || !str_is(json_object_get(c, "name"), "sandbox"))
		lack(miss, sizeof miss, "one container, named sandbox");
	if (json_array_size(json_object_get(spec, "initContainers")) ||
	    json_array_size(json_object_get(spec, "ephemeralContainers")))
		lack(miss, sizeof miss, "no init or ephemeral container");
	static const char *const hostns[] = {"hostNetwork", "hostPID", "hostIPC"};
	for (size_t i = 0; i < 3; i++)
		if (json_is_true(json_object_get(spec, hostns[i])))
			lack(miss, sizeof miss, "no %s", hostns[i]);
	if (!json_is_false(json_object_get(spec, "automountServiceAccountToken")))
		lack(miss, sizeof miss, "no service account token (automountServiceAccountToken: false)");
	json_t *vols = json_object_get(spec, "volumes"), *v;
	size_t i;
	json_array_foreach(vols, i, v) {
		if (json_object_size(v) != 2 || !json_is_object(json_object_get(v, "emptyDir"))) {
			const char *vn = json_string_value(json_object_get(v, "name"));
			lack(miss, sizeof miss, "no volume but emptyDirs (%.60s is not one)", vn ? vn : "?");
			break;
		}
	}
	json_t *psc = json_object_get(spec, "securityContext"), *csc = json_object_get(c, "securityContext");
	if (json_array_size(json_object_get(psc, "sysctls")))
		lack(miss, sizeof miss, "no sysctls");
	if (!json_is_true(sc_field(csc, psc, "runAsNonRoot")))
		lack(miss, sizeof miss, "runAsNonRoot");
	json_t *uid = sc_field(csc, psc, "runAsUser");
	if (!json_is_integer(uid) || json_integer_value(uid) <= 0)
		lack(miss, sizeof miss, "a runAsUser not 0");
	if (!json_is_false(json_object_get(csc, "allowPrivilegeEscalation")))
		lack(miss, sizeof miss, "no privilege escalation (allowPrivilegeEscalation: false)");
	if (json_is_true(json_object_get(csc, "privileged")))
		lack(miss, sizeof miss, "not privileged");
	json_t *caps = json_object_get(csc, "capabilities"), *d;
	bool all = false;
	json_array_foreach(json_object_get(caps, "drop"), i, d)
		all |= str_is(d, "ALL");
	if (!all || json_array_size(json_object_get(caps, "add")))
		lack(miss, sizeof miss, "every capability dropped (capabilities.drop [ALL], none added)");
	json_t *sp = json_object_get(sc_field(csc, psc, "seccompProfile"), "type");
	if (!str_is(sp, "RuntimeDefault") && !str_is(sp, "Localhost"))
		lack(miss, sizeof miss, "a seccomp profile (seccompProfile RuntimeDefault)");
	json_t *aa = json_object_get(sc_field(csc, psc, "appArmorProfile"), "type");
	json_t *se = json_object_get(sc_field(csc, psc, "seLinuxOptions"), "type");
	if (str_is(aa, "Unconfined") || str_is(se, "spc_t"))
		lack(miss, sizeof miss, "no unconfined AppArmor or SELinux profile");
	if (!json_object_get(json_object_get(json_object_get(c, "resources"), "limits"), "memory"))
		lack(miss, sizeof miss, "a memory limit (resources.limits.memory)");
	json_t *pm = json_object_get(csc, "procMount");
	if (pm && !str_is(pm, "Default"))
		lack(miss, sizeof miss, "the default procMount");
	if (!json_is_true(json_object_get(csc, "readOnlyRootFilesystem")))
		lack(miss, sizeof miss, "a read-only root (readOnlyRootFilesystem)");
	json_t *env = json_object_get(c, "env"), *ev;
	bool from = json_array_size(json_object_get(c, "envFrom")) > 0;
	json_array_foreach(env, i, ev)
		from |= json_object_get(ev, "valueFrom") != NULL;
	if (from)
		lack(miss, sizeof miss, "no environment from secrets or the API (env valueFrom, envFrom)");
	json_t *cmd = json_object_get(c, "command");
	if (json_array_size(cmd) != 3 || !str_is(json_array_get(cmd, 0), "sh") || !str_is(json_array_get(cmd, 1), "-c") ||
	    !str_is(json_array_get(cmd, 2), KPOD_STARTER) || json_array_size(json_object_get(c, "args")))
		lack(miss, sizeof miss, "the agent's starter as its command (sh -c '" KPOD_STARTER "')");
	if (!json_is_true(json_object_get(c, "stdin")) || !json_is_true(json_object_get(c, "stdinOnce")) ||
	    json_is_true(json_object_get(c, "tty")))
		lack(miss, sizeof miss, "stdin and stdinOnce, no tty");
	bool agent_dir = false;
	json_array_foreach(json_object_get(c, "volumeMounts"), i, v) {
		if (str_is(json_object_get(v, "mountPath"), KPOD_AGENT_DIR) && !json_is_true(json_object_get(v, "readOnly")) &&
		    !json_object_get(v, "subPath"))
			agent_dir = true;
	}
	if (!agent_dir)
		lack(miss, sizeof miss, "a writable emptyDir at " KPOD_AGENT_DIR);
	if (runtime_class && *runtime_class && !str_is(json_object_get(spec, "runtimeClassName"), runtime_class))
		lack(miss, sizeof miss, "runtimeClassName %s (--kube-runtime-class)", runtime_class);
	json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
	if (!str_is(json_object_get(labels, KPOD_LABEL_TEMPLATE_HASH), tpl_hash))
		lack(miss, sizeof miss, "the label " KPOD_LABEL_TEMPLATE_HASH "=%s of the pool's template (the egress policy "
		     "selects the pool's pods by it)", tpl_hash);
	/* A pod a server made for a sandbox of its own is some session's, never a warm one. */
	if (json_object_get(labels, KPOD_LABEL))
		lack(miss, sizeof miss, "not to be a pod a server made (label " KPOD_LABEL ")");
	if (!miss[0])
		return 0;
	return err_set(e, "the pod %s is not hardened as this server's pods are: it needs %s", name, miss);
}
