/*
 * A fake NVML library for the tests of package nvml: the entry points the
 * package reaches through go-nvml, with their real signatures. Build:
 * gcc -shared -fPIC -o libnvidia-ml.so.1 fakenvml.c
 *
 * Steered by the environment, read at each call:
 *   FAKENVML_INIT   the nvmlReturn_t nvmlInit_v2 answers (default 0)
 *   FAKENVML_TOTAL  device memory in bytes (default 80 GiB)
 *   FAKENVML_USED   bytes in use on the device (default 1 GiB)
 *   FAKENVML_PROC   bytes this process uses (default 0: not listed)
 *   FAKENVML_OTHERS processes of other pids listed before it (default 3)
 *
 * The one device has UUID GPU-00010203-0405-0607-0809-0a0b0c0d0e0f. Like
 * a process whose NVML never loaded, the fake aborts when anything but
 * nvmlInit is called after nvmlInit failed, or before it succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

enum {
	SUCCESS = 0,
	ERROR_UNINITIALIZED = 1,
	ERROR_INVALID_ARGUMENT = 2,
	ERROR_NOT_FOUND = 6,
	ERROR_INSUFFICIENT_SIZE = 7,
};

struct nvmlDevice_st {
	int index;
};

static struct nvmlDevice_st dev0;
static int inits; /* successful inits not yet shut down */
static int failed;

static const char uuid0[] = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f";

static unsigned long long envnum(const char *name, unsigned long long def) {
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : def;
}

static void need_init(const char *fn) {
	if (failed || inits == 0) {
		fprintf(stderr, "fakenvml: %s called %s\n", fn, failed ? "after nvmlInit failed" : "before nvmlInit");
		abort();
	}
}

nvmlReturn_t nvmlInit_v2(void) {
	nvmlReturn_t r = (nvmlReturn_t)envnum("FAKENVML_INIT", 0);
	if (r != SUCCESS) {
		failed = 1;
		return r;
	}
	inits++;
	return SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

nvmlReturn_t nvmlShutdown(void) {
	need_init("nvmlShutdown");
	inits--;
	return SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
	need_init("nvmlErrorString");
	return r == SUCCESS ? "Success" : "Fake error";
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
	need_init("nvmlDeviceGetHandleByUUID");
	if (uuid == NULL || d == NULL)
		return ERROR_INVALID_ARGUMENT;
	if (strcmp(uuid, uuid0) != 0)
		return ERROR_NOT_FOUND;
	*d = &dev0;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
	need_init("nvmlDeviceGetHandleByIndex_v2");
	if (d == NULL || i != 0)
		return ERROR_INVALID_ARGUMENT;
	*d = &dev0;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
	need_init("nvmlDeviceGetMemoryInfo");
	if (d != &dev0 || m == NULL)
		return ERROR_INVALID_ARGUMENT;
	m->total = envnum("FAKENVML_TOTAL", 80ull << 30);
	m->used = envnum("FAKENVML_USED", 1ull << 30);
	m->free = m->total - m->used;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
	need_init("nvmlDeviceGetComputeRunningProcesses_v3");
	if (d != &dev0 || count == NULL)
		return ERROR_INVALID_ARGUMENT;
	unsigned long long proc = envnum("FAKENVML_PROC", 0);
	unsigned int others = (unsigned int)envnum("FAKENVML_OTHERS", 3);
	unsigned int n = others + (proc > 0 ? 1 : 0);
	if (*count < n) {
		*count = n;
		return ERROR_INSUFFICIENT_SIZE;
	}
	*count = n;
	for (unsigned int i = 0; i < others; i++) {
		memset(&infos[i], 0, sizeof infos[i]);
		infos[i].pid = 1u << 22 | i;
		infos[i].usedGpuMemory = 1000 + i;
	}
	if (proc > 0) {
		memset(&infos[others], 0, sizeof infos[others]);
		infos[others].pid = (unsigned int)getpid();
		infos[others].usedGpuMemory = proc;
	}
	return SUCCESS;
}
