/*
 * A fake CUDA driver library for the tests of the CUDA backend: the driver
 * API symbols the backend uses, with their real signatures, over host
 * memory. Build: gcc -shared -fPIC -o libcuda.so.1 fakecuda.c -lpthread
 *
 * Compile-time variants: -DFAKE_NO_UUID leaves out cuDeviceGetUuid_v2 and
 * cuDeviceGetUuid (an optional symbol); -DFAKE_NO_MEMSET leaves out
 * cuMemsetD8_v2 (a required one); -DFAKE_NO_ASYNC leaves out streams,
 * events, async copies and kernels (optional ones).
 *
 * Tests steer it with fakecuda_set(key, value) and read it with
 * fakecuda_get(key):
 *   "reset"          back to one device of fakecuda "total" bytes, no failures
 *   "init"           the CUresult cuInit answers (0: success)
 *   "devices"        the device count (0: cuInit answers CUDA_ERROR_NO_DEVICE)
 *   "total"          device memory in bytes; cuMemAlloc_v2 fails past it
 *   "fail:NAME"      every later call of NAME answers this CUresult (0: none)
 *   "calls:NAME"     (get) how many times NAME was called
 *   "live"           (get) live allocations
 *   "retained"       (get) primary context references held
 *   "badctx"         (get) calls made without the primary context current
 *   "hold"           nonzero: stream threads start no queued work until 0
 *   "streams"        (get) live streams; "events" live events; "pinned"
 *                    live page-locked buffers; "modules" loaded modules
 *   "launches"       (get) kernels run to completion
 *
 * Streams are real threads: work queued on one (async copies, kernels,
 * event records, waits on events) runs later, on the stream's own thread, in
 * queue order, so a caller that reuses memory too early is caught. Kernels
 * cannot run PTX: cuModuleGetFunction finds ".entry NAME" in the module's
 * text, and a launch runs a built-in body when NAME is one of
 *   gpustate_fake_fill(u64 dst, u32 value, u64 n)  memset of n bytes
 * and does nothing otherwise. A queued kernel or copy that meets memory no
 * longer live fails the stream with CUDA_ERROR_ILLEGAL_ADDRESS, which later
 * event queries and synchronizations answer.
 *
 * Every memory call checks that the calling thread has a retained primary
 * context current and that device pointers lie inside live allocations, as
 * the real driver does; cuMemAlloc_v2 fills new memory with 0xA5 so a backend
 * that promises zeroed memory must clear it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct { char bytes[16]; } CUuuid;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	NOT_READY = 600,
	ILLEGAL_ADDRESS = 700,
};

#define MAXDEV 4

struct fake_ctx {
	int dev;
	int refs;
};

struct alloc {
	CUdeviceptr p;
	size_t n;
	struct alloc *next;
};

static const char *names[] = {
	"cuInit", "cuDriverGetVersion", "cuGetErrorName", "cuDeviceGetCount",
	"cuDeviceGet", "cuDeviceGetName", "cuDeviceTotalMem_v2",
	"cuDeviceGetUuid_v2", "cuDeviceGetUuid", "cuDevicePrimaryCtxRetain",
	"cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxSynchronize",
	"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
	"cuMemcpyDtoD_v2", "cuMemsetD8_v2", "cuMemGetInfo_v2",
	"cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize",
	"cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",
	"cuEventDestroy_v2", "cuStreamWaitEvent", "cuMemcpyHtoDAsync_v2",
	"cuMemcpyDtoHAsync_v2", "cuMemHostAlloc", "cuMemFreeHost",
	"cuModuleLoadData", "cuModuleGetFunction", "cuModuleUnload",
	"cuLaunchKernel", "cuMemcpyDtoDAsync_v2",
};
#define NFN (int)(sizeof names / sizeof names[0])

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized, init_result, ndev = 1;
static unsigned long long total = 1ull << 30, used;
static long long live, badctx;
static struct fake_ctx primary[MAXDEV];
static struct alloc *allocs;
static int fail[NFN];
static long long calls[NFN];
static __thread CUcontext current;

static int fn_index(const char *name) {
	for (int i = 0; i < NFN; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

/* enter counts a call of fn and answers its injected failure, if any. */
static CUresult enter(const char *fn) {
	int i = fn_index(fn);
	pthread_mutex_lock(&mu);
	calls[i]++;
	CUresult r = fail[i];
	if (r == SUCCESS && strcmp(fn, "cuInit") != 0 && strcmp(fn, "cuDriverGetVersion") != 0 &&
	    strcmp(fn, "cuGetErrorName") != 0 && !initialized)
		r = NOT_INITIALIZED;
	pthread_mutex_unlock(&mu);
	return r;
}

/* needctx answers INVALID_CONTEXT unless a retained primary context is current. */
static CUresult needctx(void) {
	pthread_mutex_lock(&mu);
	CUresult r = SUCCESS;
	if (current == NULL || current->refs <= 0) {
		badctx++;
		r = INVALID_CONTEXT;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

/* inside reports whether [p, p+n) lies in one live allocation. Holds mu. */
static int inside(CUdeviceptr p, size_t n) {
	for (struct alloc *a = allocs; a; a = a->next)
		if (p >= a->p && p - a->p <= a->n && n <= a->n - (p - a->p))
			return 1;
	return 0;
}

static CUresult checkrange(CUdeviceptr p, size_t n) {
	pthread_mutex_lock(&mu);
	int ok = inside(p, n);
	pthread_mutex_unlock(&mu);
	return ok ? SUCCESS : INVALID_VALUE;
}

#define ENTER(fn)                            \
	do {                                 \
		CUresult r_ = enter(fn);     \
		if (r_ != SUCCESS)           \
			return r_;           \
	} while (0)
#define NEEDCTX()                            \
	do {                                 \
		CUresult r_ = needctx();     \
		if (r_ != SUCCESS)           \
			return r_;           \
	} while (0)

static void fake_hold(long long v);
static long long fake_count(const char *key);

int fakecuda_set(const char *key, long long value) {
	pthread_mutex_lock(&mu);
	int ok = 1;
	if (strcmp(key, "reset") == 0) {
		init_result = 0;
		ndev = 1;
		total = 1ull << 30;
		memset(fail, 0, sizeof fail);
		memset(calls, 0, sizeof calls);
		badctx = 0;
	} else if (strcmp(key, "init") == 0) {
		init_result = (int)value;
	} else if (strcmp(key, "devices") == 0) {
		ndev = value < 0 ? 0 : value > MAXDEV ? MAXDEV : (int)value;
	} else if (strcmp(key, "hold") == 0) {
		fake_hold(value);
	} else if (strcmp(key, "total") == 0) {
		total = (unsigned long long)value;
	} else if (strncmp(key, "fail:", 5) == 0 && fn_index(key + 5) >= 0) {
		fail[fn_index(key + 5)] = (int)value;
	} else {
		ok = 0;
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

long long fakecuda_get(const char *key) {
	pthread_mutex_lock(&mu);
	long long v = -1;
	if (strcmp(key, "live") == 0) {
		v = live;
	} else if (strcmp(key, "retained") == 0) {
		v = 0;
		for (int i = 0; i < MAXDEV; i++)
			v += primary[i].refs;
	} else if (strcmp(key, "badctx") == 0) {
		v = badctx;
	} else if (strcmp(key, "streams") == 0 || strcmp(key, "events") == 0 ||
		   strcmp(key, "pinned") == 0 || strcmp(key, "modules") == 0 ||
		   strcmp(key, "launches") == 0) {
		v = fake_count(key);
	} else if (strcmp(key, "used") == 0) {
		v = (long long)used;
	} else if (strncmp(key, "calls:", 6) == 0 && fn_index(key + 6) >= 0) {
		v = calls[fn_index(key + 6)];
	}
	pthread_mutex_unlock(&mu);
	return v;
}

CUresult cuInit(unsigned int flags) {
	ENTER("cuInit");
	if (flags != 0)
		return INVALID_VALUE;
	pthread_mutex_lock(&mu);
	CUresult r = init_result;
	if (r == SUCCESS && ndev == 0)
		r = NO_DEVICE;
	if (r == SUCCESS)
		initialized = 1;
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuDriverGetVersion(int *v) {
	ENTER("cuDriverGetVersion");
	if (v == NULL)
		return INVALID_VALUE;
	*v = 12040;
	return SUCCESS;
}

CUresult cuGetErrorName(CUresult code, const char **s) {
	ENTER("cuGetErrorName");
	if (s == NULL)
		return INVALID_VALUE;
	switch (code) {
	case SUCCESS: *s = "CUDA_SUCCESS"; break;
	case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
	case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
	case 34: *s = "CUDA_ERROR_STUB_LIBRARY"; break;
	case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
	case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
	case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
	case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
	case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
	case NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
	case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
	default: *s = NULL; return INVALID_VALUE;
	}
	return SUCCESS;
}

CUresult cuDeviceGetCount(int *n) {
	ENTER("cuDeviceGetCount");
	if (n == NULL)
		return INVALID_VALUE;
	pthread_mutex_lock(&mu);
	*n = ndev;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

static int validdev(int d) {
	pthread_mutex_lock(&mu);
	int ok = d >= 0 && d < ndev;
	pthread_mutex_unlock(&mu);
	return ok;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	ENTER("cuDeviceGet");
	if (d == NULL)
		return INVALID_VALUE;
	if (!validdev(ordinal))
		return INVALID_DEVICE;
	*d = ordinal;
	return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	ENTER("cuDeviceGetName");
	if (name == NULL || len <= 0)
		return INVALID_VALUE;
	if (!validdev(d))
		return INVALID_DEVICE;
	static const char n[] = "Fake CUDA Device";
	strncpy(name, n, (size_t)len - 1);
	name[len - 1] = 0;
	return SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	ENTER("cuDeviceTotalMem_v2");
	if (bytes == NULL)
		return INVALID_VALUE;
	if (!validdev(d))
		return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	*bytes = total;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

#ifndef FAKE_NO_UUID
static CUresult uuid(const char *fn, CUuuid *u, CUdevice d) {
	ENTER(fn);
	if (u == NULL)
		return INVALID_VALUE;
	if (!validdev(d))
		return INVALID_DEVICE;
	for (int i = 0; i < 16; i++)
		u->bytes[i] = (char)(0x10 * d + i);
	return SUCCESS;
}
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { return uuid("cuDeviceGetUuid_v2", u, d); }
CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) { return uuid("cuDeviceGetUuid", u, d); }
#endif

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
	ENTER("cuDevicePrimaryCtxRetain");
	if (ctx == NULL)
		return INVALID_VALUE;
	if (!validdev(d))
		return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	primary[d].dev = d;
	primary[d].refs++;
	*ctx = &primary[d];
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	ENTER("cuDevicePrimaryCtxRelease_v2");
	if (!validdev(d))
		return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	CUresult r = SUCCESS;
	if (primary[d].refs <= 0)
		r = INVALID_CONTEXT;
	else
		primary[d].refs--;
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
	ENTER("cuCtxSetCurrent");
	current = ctx;
	return SUCCESS;
}

CUresult cuCtxSynchronize(void) {
	ENTER("cuCtxSynchronize");
	NEEDCTX();
	return SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	ENTER("cuMemAlloc_v2");
	NEEDCTX();
	if (p == NULL || n == 0)
		return INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (n > total || used > total - n) {
		pthread_mutex_unlock(&mu);
		return OUT_OF_MEMORY;
	}
	void *m = malloc(n);
	struct alloc *a = malloc(sizeof *a);
	if (m == NULL || a == NULL) {
		free(m);
		free(a);
		pthread_mutex_unlock(&mu);
		return OUT_OF_MEMORY;
	}
	memset(m, 0xA5, n);
	a->p = (CUdeviceptr)(uintptr_t)m;
	a->n = n;
	a->next = allocs;
	allocs = a;
	used += n;
	live++;
	*p = a->p;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	ENTER("cuMemFree_v2");
	NEEDCTX();
	pthread_mutex_lock(&mu);
	for (struct alloc **ap = &allocs; *ap; ap = &(*ap)->next) {
		struct alloc *a = *ap;
		if (a->p == p) {
			*ap = a->next;
			used -= a->n;
			live--;
			pthread_mutex_unlock(&mu);
			free((void *)(uintptr_t)a->p);
			free(a);
			return SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	ENTER("cuMemcpyHtoD_v2");
	NEEDCTX();
	if (src == NULL || checkrange(dst, n) != SUCCESS)
		return INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	ENTER("cuMemcpyDtoH_v2");
	NEEDCTX();
	if (dst == NULL || checkrange(src, n) != SUCCESS)
		return INVALID_VALUE;
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return SUCCESS;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	ENTER("cuMemcpyDtoD_v2");
	NEEDCTX();
	if (checkrange(dst, n) != SUCCESS || checkrange(src, n) != SUCCESS)
		return INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return SUCCESS;
}

#ifndef FAKE_NO_MEMSET
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
	ENTER("cuMemsetD8_v2");
	NEEDCTX();
	if (checkrange(dst, n) != SUCCESS)
		return INVALID_VALUE;
	memset((void *)(uintptr_t)dst, v, n);
	return SUCCESS;
}
#endif

CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp) {
	ENTER("cuMemGetInfo_v2");
	NEEDCTX();
	if (freep == NULL || totalp == NULL)
		return INVALID_VALUE;
	pthread_mutex_lock(&mu);
	*freep = total - used;
	*totalp = total;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

#ifndef FAKE_NO_ASYNC
#include "fakecuda_async.c"
#else
static void fake_hold(long long v) { (void)v; }
static long long fake_count(const char *key) { (void)key; return 0; }
#endif
