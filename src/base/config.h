/*
 * The configuration every layer reads: the server's options as src/cli.c fills them from the
 * command line, the environment and the defaults (each backend's own options are a struct of
 * the backend's, in backend_opts). Read-only once the server runs.
 */
#ifndef SANDBOX_CONFIG_H
#define SANDBOX_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "err.h"
#include "mountspec.h"

enum net_policy { NET_NONE, NET_INSTALL, NET_ALL };

#define CONFIG_BACKENDS_MAX 8

struct config {
	char backend[16];        /* auto, or a backend's name */
	double timeout_s;        /* default per-call timeout */
	double max_timeout_s;    /* largest timeout_s a call may ask for */
	uint64_t output_cap;     /* bytes of each stream kept in memory; past it, the stream is spilled */
	uint64_t result_max;     /* largest serialized result of a call */
	uint64_t max_background; /* background processes that may run at once */
	uint64_t max_sessions;   /* Python sessions that may live at once */
	double bg_timeout_s;     /* default timeout_s of a background process */
	double bg_max_timeout_s; /* largest timeout_s a background process may ask for */
	uint64_t spill_max;      /* largest spill file per stream */
	uint64_t memory;         /* bytes, whole sandbox */
	double cpus;
	uint64_t pids;
	uint64_t open_files;
	uint64_t file_size;
	uint64_t tmp_size;
	uint64_t workspace_size;  /* the workspace's disk quota; 0: none */
	int network;             /* enum net_policy */
	char wheelhouse[4096];   /* host folder of wheels, resolved at start-up; "" for none */
	dev_t wheelhouse_dev;    /* which folder it is (hostfolders_check): it is bound only */
	ino_t wheelhouse_ino;    /* while it is still this one */
	char index_url[1024];    /* the package index installs use */
	char index_hosts[1024];  /* more hosts the install step may reach, comma-separated */
	char allow_hosts[4096];  /* --allow-hosts: the hosts the code reaches through the server's
	                          * proxy (run/netpolicy.h); "" for none */
	double idle_timeout_s;
	uint64_t queue_max;      /* calls waiting behind the running one */
	uint64_t max_message;    /* longest accepted input line, bytes */
	bool keep;               /* keep the sandbox at shutdown */
	bool gpu;                /* --gpu: the sandbox gets the host's NVIDIA GPUs */
	double shutdown_budget_s;/* on stdin EOF: how long requests read may take to be answered */
	char workspace_dir[4096];/* --workspace: a host folder that is the workspace; "" for none */
	bool workspace_claim;    /* workspace_dir names the backend's own store of it (on kubernetes a
	                          * PersistentVolumeClaim), no host folder (cli.c sets it) */
	struct mountlist mounts; /* --mount */
	char state_dir[4096];    /* where local workspaces live; "" for the default */
	char python[256];        /* interpreter inside the sandbox */
	bool sandbox_ahead;      /* make the sandbox ahead of the first call and after a cleanup */
	bool python_prestart;    /* run execute_python calls in interpreters started ahead */
	char python_preload[1024]; /* modules those interpreters import first, comma-separated */
	int log_level;           /* enum log_level, for stderr */
	uint64_t sandbox_uid;    /* host uid the sandbox user maps to when we run as root */
	/* Each backend's own options (its opts_size bytes; backend.h), by its place in the backend
	 * table; owned, freed with config_free. */
	void *backend_opts[CONFIG_BACKENDS_MAX];
};

/* Frees the backends' options. */
void config_free(struct config *cfg);

/* Human-readable size ("512 MiB") into buf; returns buf. */
const char *config_fmt_size(uint64_t v, char *buf, size_t n);

/* "none", "install", "all"; and back (-1 for another name). */
const char *config_net_name(int policy);
int config_net_parse(const char *name);

#endif
