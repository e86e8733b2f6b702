/*
 * The host's NVIDIA GPUs, as --gpu gives them to a sandbox: what the driver shows
 * (/proc/driver/nvidia/gpus/ * /information) and its device nodes in /dev.
 */
#ifndef SANDBOX_GPU_H
#define SANDBOX_GPU_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

#define GPU_NODES_MAX 64

/* The device nodes a sandbox with --gpu gets, as absolute paths: /dev/nvidiactl,
 * /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia-modeset, /dev/nvidiaN (character devices
 * only), and the folders /dev/nvidia-caps and /dev/dri where present. Nothing else of /dev.
 * The number found (at most max, each of n bytes in paths[i]), or -1 with e saying why there is
 * no GPU to give (no /dev/nvidiactl, or no /dev/nvidiaN). */
int gpu_nodes(char (*paths)[64], size_t max, struct err *e);

/* Writes one line per GPU the driver shows ("GPU 0: MODEL (BUS)"), or one line saying why none
 * is seen, each after prefix. */
void gpu_report(FILE *f, const char *prefix);

#endif
