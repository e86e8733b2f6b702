#include "dkvolume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/log.h"

/* Engine call timeouts, ms: a volume is made and removed at once; a loaded engine gets a
 * second, longer try at removal rather than leave one behind. */
#define T_QUICK 15000L
#define T_SLOW 60000L

static int remove_once(struct dkapi *eng, const char *name, long timeout_ms, long *status, json_t **ans,
		       struct err *e)
{
	char path[256];
	snprintf(path, sizeof path, "/volumes/%s", name);
	return dkapi_call(eng, "DELETE", path, NULL, timeout_ms, status, ans, e);
}

int dkvolume_remove(struct dkapi *eng, const char *name)
{
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	struct dkapi_held held = dkapi_hold_cancel(eng);
	int rc = remove_once(eng, name, T_QUICK, &status, &ans, &e);
	if (rc < 0) {
		err_clear(&e);
		rc = remove_once(eng, name, T_SLOW, &status, &ans, &e);
	}
	dkapi_release_cancel(eng, held);
	if (rc < 0) {
		log_msg(LOG_WARNING, "could not remove volume %s: %s", name, e.msg);
	} else if (status != 204 && status != 404) {
		log_msg(LOG_WARNING, "could not remove volume %s: %s (HTTP %ld)", name,
			dkapi_message(ans, "the engine refused"), status);
		rc = -1;
	}
	json_decref(ans);
	return rc;
}

/* Removes the volume when the engine has one of that name with these labels: a create that got
 * no answer may or may not have made it, and a volume of that name that is not ours stays. */
static void remove_if_ours(struct dkapi *eng, const char *name, const json_t *labels)
{
	char path[256];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	struct dkapi_held held = dkapi_hold_cancel(eng);
	snprintf(path, sizeof path, "/volumes/%s", name);
	if (dkapi_call(eng, "GET", path, NULL, T_QUICK, &status, &ans, &e) == 0 && status == 200 &&
	    json_equal(json_object_get(ans, "Labels"), labels))
		(void)dkvolume_remove(eng, name);
	dkapi_release_cancel(eng, held);
	json_decref(ans);
}

static bool str_is(const json_t *obj, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(obj, key));
	return v && !strcmp(v, want);
}

int dkvolume_create(struct dkapi *eng, const char *name, uint64_t bytes, uid_t uid, gid_t gid, json_t *labels,
		    struct err *e)
{
	char o[160];
	long status = 0;
	json_t *ans = NULL;
	snprintf(o, sizeof o, "size=%llu,nr_inodes=%llu,mode=0755,uid=%u,gid=%u,nosuid,nodev", (unsigned long long)bytes,
		 (unsigned long long)(bytes / 8192 ? bytes / 8192 : 1), (unsigned)uid, (unsigned)gid);
	json_t *spec = bytes ? json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:O}", "Name", name, "Driver", "local",
					 "DriverOpts", "type", "tmpfs", "device", "tmpfs", "o", o, "Labels", labels)
			     : json_pack("{s:s, s:s, s:O}", "Name", name, "Driver", "local", "Labels", labels);
	if (!spec)
		return err_set(e, "out of memory");
	int rc = dkapi_call(eng, "POST", "/volumes/create", spec, T_QUICK, &status, &ans, e);
	json_decref(spec);
	/* Cut short or timed out, it may have reached the engine. */
	if (rc < 0)
		remove_if_ours(eng, name, labels);
	if (rc == 0 && status != 201 && status != 200)
		rc = err_set(e, "the engine refused to make the workspace's volume: %s (HTTP %ld)",
			     dkapi_message(ans, "no reason given"), status);
	/* The engine answers a create of a name it has with the volume it has, whatever the
	 * options and labels asked for: it must be this one, labelled by this server (pid and
	 * start time) for this sandbox, which only this request can have made. One that is not
	 * stays as it is. */
	json_t *opts = json_object_get(ans, "Options");
	if (rc == 0 && (!json_equal(json_object_get(ans, "Labels"), labels) ||
			(bytes ? !str_is(opts, "type", "tmpfs") : json_object_size(opts) != 0)))
		rc = err_set(e, "the engine already has a volume named %s that is not this sandbox's", name);
	json_decref(ans);
	return rc;
}

json_t *dkvolume_mount(const char *name, const char *target)
{
	return json_pack("{s:s, s:s, s:s, s:b, s:{s:b}}", "Type", "volume", "Source", name, "Target", target, "ReadOnly",
			 0, "VolumeOptions", "NoCopy", 1);
}

void dkvolume_reap(struct dkapi *eng, const char *label, bool (*dead)(json_t *labels, void *ctx), void *ctx)
{
	char path[256], filter[128];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	snprintf(filter, sizeof filter, "{\"label\":[\"%s=1\"]}", label);
	char *esc = http_escape(filter);
	if (!esc)
		return;
	snprintf(path, sizeof path, "/volumes?filters=%s", esc);
	free(esc);
	if (dkapi_call(eng, "GET", path, NULL, T_QUICK, &status, &ans, &e) < 0 || status != 200) {
		log_msg(LOG_DEBUG, "docker: listing leftover volumes failed: %s", e.msg[0] ? e.msg : "HTTP error");
		json_decref(ans);
		return;
	}
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(ans, "Volumes"), i, v) {
		const char *name = json_string_value(json_object_get(v, "Name"));
		if (name && dead(json_object_get(v, "Labels"), ctx) && dkvolume_remove(eng, name) == 0)
			log_msg(LOG_INFO, "removed volume %s, left by a server that is gone", name);
	}
	json_decref(ans);
}
