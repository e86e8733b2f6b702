/* The host's NVIDIA GPUs (see gpu.h). */
#include "gpu.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int add(char (*paths)[64], size_t max, size_t *n, const char *path, bool dir)
{
	struct stat st;
	if (lstat(path, &st) < 0 || (dir ? !S_ISDIR(st.st_mode) : !S_ISCHR(st.st_mode)))
		return 0;
	if (*n >= max)
		return -1;
	snprintf(paths[(*n)++], 64, "%s", path);
	return 0;
}

int gpu_nodes(char (*paths)[64], size_t max, struct err *e)
{
	size_t n = 0, cards = 0;
	if (add(paths, max, &n, "/dev/nvidiactl", false) < 0 || n == 0)
		return err_set(e, "no NVIDIA GPU here: /dev/nvidiactl is missing (no NVIDIA driver is loaded; nvidia-smi "
				  "says more)");
	static const char *const extra[] = {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};
	for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
		if (add(paths, max, &n, extra[i], false) < 0)
			return err_set(e, "too many GPU device nodes");
	DIR *d = opendir("/dev");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		const char *s = de->d_name;
		if (strncmp(s, "nvidia", 6) || !s[6] || strspn(s + 6, "0123456789") != strlen(s + 6))
			continue;
		char p[64];
		snprintf(p, sizeof p, "/dev/%.40s", s);
		size_t before = n;
		if (add(paths, max, &n, p, false) < 0) {
			closedir(d);
			return err_set(e, "too many GPU device nodes");
		}
		cards += n > before;
	}
	if (d)
		closedir(d);
	if (!cards)
		return err_set(e, "no NVIDIA GPU here: /dev/nvidiactl is there but no /dev/nvidiaN (the driver sees no GPU)");
	if (add(paths, max, &n, "/dev/nvidia-caps", true) < 0 || add(paths, max, &n, "/dev/dri", true) < 0)
		return err_set(e, "too many GPU device nodes");
	return (int)n;
}

void gpu_report(FILE *f, const char *prefix)
{
	char paths[GPU_NODES_MAX][64];
	struct err e = {""};
	int n = gpu_nodes(paths, GPU_NODES_MAX, &e);
	if (n < 0) {
		fprintf(f, "%s%s\n", prefix, e.msg);
		return;
	}
	DIR *d = opendir("/proc/driver/nvidia/gpus");
	struct dirent *de;
	int k = 0;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[320], line[256], model[200] = "?";
		snprintf(p, sizeof p, "/proc/driver/nvidia/gpus/%.200s/information", de->d_name);
		FILE *in = fopen(p, "re");
		while (in && fgets(line, sizeof line, in))
			if (!strncmp(line, "Model:", 6)) {
				snprintf(model, sizeof model, "%s", line + 6 + strspn(line + 6, " \t"));
				model[strcspn(model, "\n")] = '\0';
			}
		if (in)
			fclose(in);
		fprintf(f, "%sGPU %d: %s (%s)\n", prefix, k++, model, de->d_name);
	}
	if (d)
		closedir(d);
	if (!k)
		fprintf(f, "%sthe driver's device nodes are there (%d), but /proc/driver/nvidia lists no GPU\n", prefix, n);
}
