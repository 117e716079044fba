/*
 * Streams, events, async copies, page-locked memory, modules and kernel
 * launches of the fake CUDA driver; included at the end of fakecuda.c.
 * One mutex (smu) and one condition (scv) guard every stream, event and
 * queue; stream threads take mu (the allocation list) only without smu.
 */
#include <stdio.h>

enum { OP_COPY, OP_RECORD, OP_WAIT, OP_FILL, OP_NOP };

/* An event counts its records: recorded, the last one made; completed, the
 * last one its stream reached. It is done when completed catches up with
 * recorded, and a wait waits for the record made before it, as the real
 * driver's do: recording an event again while an earlier record is queued
 * (an event reused) is not done when the earlier one is reached. */
struct fake_event {
	long long recorded, completed;
	CUresult err;
	int refs; /* the handle, and each queued op that names the event */
};
typedef struct fake_event *CUevent;

struct op {
	int kind;
	void *dst;		/* OP_COPY: host or device address */
	const void *src;
	size_t n;
	CUdeviceptr check;	/* device range that must be live when run */
	size_t checkn;
	CUdeviceptr check2;
	size_t check2n;
	unsigned char value;	/* OP_FILL */
	struct fake_event *ev;	/* OP_RECORD, OP_WAIT */
	long long seq;		/* OP_RECORD: its record; OP_WAIT: the one waited for */
	struct op *next;
};

struct fake_stream {
	pthread_t th;
	struct op *head, *tail;
	int busy, closing;
	CUresult err;		/* sticky: the first failure of queued work */
};
typedef struct fake_stream *CUstream;

struct fake_module {
	char *text;
};
typedef struct fake_module *CUmodule;

struct fake_function {
	char name[128];
	struct fake_module *mod;
};
typedef struct fake_function *CUfunction;

static pthread_mutex_t smu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scv = PTHREAD_COND_INITIALIZER;
static int hold;
static long long nstreams, nevents, npinned, nmodules, nlaunches;

static void fake_hold(long long v) {
	pthread_mutex_lock(&smu);
	hold = v != 0;
	pthread_cond_broadcast(&scv);
	pthread_mutex_unlock(&smu);
}

static long long fake_count(const char *key) {
	pthread_mutex_lock(&smu);
	long long v = -1;
	if (strcmp(key, "streams") == 0)
		v = nstreams;
	else if (strcmp(key, "events") == 0)
		v = nevents;
	else if (strcmp(key, "pinned") == 0)
		v = npinned;
	else if (strcmp(key, "modules") == 0)
		v = nmodules;
	else if (strcmp(key, "launches") == 0)
		v = nlaunches;
	pthread_mutex_unlock(&smu);
	return v;
}

/* unref drops a reference to e; the last one frees it. Holds smu. */
static void unref(struct fake_event *e) {
	if (--e->refs == 0) {
		nevents--;
		free(e);
	}
}

/* run does one op on a stream thread; smu is not held. */
static CUresult run(struct op *o) {
	if (o->checkn && checkrange(o->check, o->checkn) != SUCCESS)
		return ILLEGAL_ADDRESS;
	if (o->check2n && checkrange(o->check2, o->check2n) != SUCCESS)
		return ILLEGAL_ADDRESS;
	switch (o->kind) {
	case OP_COPY:
		memmove(o->dst, o->src, o->n);
		break;
	case OP_FILL:
		memset(o->dst, o->value, o->n);
		break;
	}
	return SUCCESS;
}

static void *stream_main(void *arg) {
	struct fake_stream *s = arg;
	pthread_mutex_lock(&smu);
	for (;;) {
		while ((s->head == NULL || hold) && !(s->closing && s->head == NULL))
			pthread_cond_wait(&scv, &smu);
		if (s->head == NULL)
			break;
		struct op *o = s->head;
		s->head = o->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->busy = 1;
		if (o->kind == OP_RECORD) {
			if (o->seq > o->ev->completed) {
				o->ev->completed = o->seq;
				o->ev->err = s->err;
			}
			unref(o->ev);
		} else if (o->kind == OP_WAIT) {
			while (o->ev->completed < o->seq)
				pthread_cond_wait(&scv, &smu);
			unref(o->ev);
		} else {
			pthread_mutex_unlock(&smu);
			CUresult r = s->err == SUCCESS ? run(o) : SUCCESS;
			pthread_mutex_lock(&smu);
			if (r != SUCCESS && s->err == SUCCESS)
				s->err = r;
			if (o->kind == OP_FILL || o->kind == OP_NOP)
				nlaunches++;
		}
		s->busy = 0;
		free(o);
		pthread_cond_broadcast(&scv);
	}
	pthread_mutex_unlock(&smu);
	return NULL;
}

/* push queues o on s, or runs it at once on the null stream. */
static CUresult push(struct fake_stream *s, struct op *o) {
	if (s == NULL) {
		CUresult r = run(o);
		free(o);
		return r;
	}
	o->next = NULL;
	pthread_mutex_lock(&smu);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&scv);
	pthread_mutex_unlock(&smu);
	return SUCCESS;
}

static struct op *newop(int kind) {
	struct op *o = calloc(1, sizeof *o);
	if (o)
		o->kind = kind;
	return o;
}

CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
	ENTER("cuStreamCreate");
	NEEDCTX();
	(void)flags;
	if (ps == NULL)
		return INVALID_VALUE;
	struct fake_stream *s = calloc(1, sizeof *s);
	if (s == NULL)
		return OUT_OF_MEMORY;
	if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
		free(s);
		return OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&smu);
	nstreams++;
	pthread_mutex_unlock(&smu);
	*ps = s;
	return SUCCESS;
}

/* Unlike the real driver, destroying a stream waits for its queued work. */
CUresult cuStreamDestroy_v2(CUstream s) {
	ENTER("cuStreamDestroy_v2");
	NEEDCTX();
	if (s == NULL)
		return INVALID_HANDLE;
	pthread_mutex_lock(&smu);
	s->closing = 1;
	nstreams--;
	pthread_cond_broadcast(&scv);
	pthread_mutex_unlock(&smu);
	pthread_join(s->th, NULL);
	free(s);
	return SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
	ENTER("cuStreamSynchronize");
	NEEDCTX();
	if (s == NULL)
		return SUCCESS;
	pthread_mutex_lock(&smu);
	while (s->head != NULL || s->busy)
		pthread_cond_wait(&scv, &smu);
	CUresult r = s->err;
	pthread_mutex_unlock(&smu);
	return r;
}

CUresult cuEventCreate(CUevent *pe, unsigned int flags) {
	ENTER("cuEventCreate");
	NEEDCTX();
	(void)flags;
	if (pe == NULL)
		return INVALID_VALUE;
	struct fake_event *e = calloc(1, sizeof *e);
	if (e == NULL)
		return OUT_OF_MEMORY;
	e->refs = 1;
	pthread_mutex_lock(&smu);
	nevents++;
	pthread_mutex_unlock(&smu);
	*pe = e;
	return SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s) {
	ENTER("cuEventRecord");
	NEEDCTX();
	if (e == NULL)
		return INVALID_HANDLE;
	if (s == NULL) {
		pthread_mutex_lock(&smu);
		e->completed = ++e->recorded;
		e->err = SUCCESS;
		pthread_cond_broadcast(&scv);
		pthread_mutex_unlock(&smu);
		return SUCCESS;
	}
	struct op *o = newop(OP_RECORD);
	if (o == NULL)
		return OUT_OF_MEMORY;
	o->ev = e;
	pthread_mutex_lock(&smu);
	o->seq = ++e->recorded;
	e->refs++;
	pthread_mutex_unlock(&smu);
	return push(s, o);
}

CUresult cuEventQuery(CUevent e) {
	ENTER("cuEventQuery");
	NEEDCTX();
	if (e == NULL)
		return INVALID_HANDLE;
	pthread_mutex_lock(&smu);
	CUresult r = e->completed >= e->recorded ? e->err : NOT_READY;
	pthread_mutex_unlock(&smu);
	return r;
}

CUresult cuEventSynchronize(CUevent e) {
	ENTER("cuEventSynchronize");
	NEEDCTX();
	if (e == NULL)
		return INVALID_HANDLE;
	pthread_mutex_lock(&smu);
	long long want = e->recorded;
	while (e->completed < want)
		pthread_cond_wait(&scv, &smu);
	CUresult r = e->err;
	pthread_mutex_unlock(&smu);
	return r;
}

CUresult cuEventDestroy_v2(CUevent e) {
	ENTER("cuEventDestroy_v2");
	NEEDCTX();
	if (e == NULL)
		return INVALID_HANDLE;
	/* As the real driver does, destroying returns at once; the event is
	 * freed when the last queued op that names it has run. */
	pthread_mutex_lock(&smu);
	unref(e);
	pthread_mutex_unlock(&smu);
	return SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
	ENTER("cuStreamWaitEvent");
	NEEDCTX();
	if (e == NULL || flags != 0)
		return INVALID_VALUE;
	if (s == NULL) {
		pthread_mutex_lock(&smu);
		long long want = e->recorded;
		while (e->completed < want)
			pthread_cond_wait(&scv, &smu);
		pthread_mutex_unlock(&smu);
		return SUCCESS;
	}
	struct op *o = newop(OP_WAIT);
	if (o == NULL)
		return OUT_OF_MEMORY;
	o->ev = e;
	pthread_mutex_lock(&smu);
	o->seq = e->recorded;
	e->refs++;
	pthread_mutex_unlock(&smu);
	return push(s, o);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	ENTER("cuMemcpyHtoDAsync_v2");
	NEEDCTX();
	if (src == NULL || checkrange(dst, n) != SUCCESS)
		return INVALID_VALUE;
	struct op *o = newop(OP_COPY);
	if (o == NULL)
		return OUT_OF_MEMORY;
	o->dst = (void *)(uintptr_t)dst;
	o->src = src;
	o->n = n;
	o->check = dst;
	o->checkn = n;
	return push(s, o);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	ENTER("cuMemcpyDtoDAsync_v2");
	NEEDCTX();
	if (checkrange(dst, n) != SUCCESS || checkrange(src, n) != SUCCESS)
		return INVALID_VALUE;
	struct op *o = newop(OP_COPY);
	if (o == NULL)
		return OUT_OF_MEMORY;
	o->dst = (void *)(uintptr_t)dst;
	o->src = (const void *)(uintptr_t)src;
	o->n = n;
	o->check = dst;
	o->checkn = n;
	o->check2 = src;
	o->check2n = n;
	return push(s, o);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
	ENTER("cuMemcpyDtoHAsync_v2");
	NEEDCTX();
	if (dst == NULL || checkrange(src, n) != SUCCESS)
		return INVALID_VALUE;
	struct op *o = newop(OP_COPY);
	if (o == NULL)
		return OUT_OF_MEMORY;
	o->dst = dst;
	o->src = (const void *)(uintptr_t)src;
	o->n = n;
	o->check = src;
	o->checkn = n;
	return push(s, o);
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
	ENTER("cuMemHostAlloc");
	NEEDCTX();
	(void)flags;
	if (pp == NULL || n == 0)
		return INVALID_VALUE;
	void *p = malloc(n);
	if (p == NULL)
		return OUT_OF_MEMORY;
	pthread_mutex_lock(&smu);
	npinned++;
	pthread_mutex_unlock(&smu);
	*pp = p;
	return SUCCESS;
}

CUresult cuMemFreeHost(void *p) {
	ENTER("cuMemFreeHost");
	NEEDCTX();
	if (p == NULL)
		return INVALID_VALUE;
	pthread_mutex_lock(&smu);
	npinned--;
	pthread_mutex_unlock(&smu);
	free(p);
	return SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *pm, const void *image) {
	ENTER("cuModuleLoadData");
	NEEDCTX();
	if (pm == NULL || image == NULL)
		return INVALID_VALUE;
	if (strstr(image, ".version") == NULL || strstr(image, ".target") == NULL)
		return 218; /* CUDA_ERROR_INVALID_PTX */
	struct fake_module *m = calloc(1, sizeof *m);
	if (m == NULL || (m->text = strdup(image)) == NULL) {
		free(m);
		return OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&smu);
	nmodules++;
	pthread_mutex_unlock(&smu);
	*pm = m;
	return SUCCESS;
}

static int isident(char c) {
	return c == '_' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

CUresult cuModuleGetFunction(CUfunction *pf, CUmodule m, const char *name) {
	ENTER("cuModuleGetFunction");
	NEEDCTX();
	if (pf == NULL || m == NULL || name == NULL || strlen(name) >= sizeof((struct fake_function *)0)->name)
		return INVALID_VALUE;
	size_t n = strlen(name);
	for (const char *p = strstr(m->text, ".entry "); p; p = strstr(p + 1, ".entry ")) {
		const char *q = p + 7;
		while (*q == ' ')
			q++;
		if (strncmp(q, name, n) == 0 && !isident(q[n])) {
			struct fake_function *f = calloc(1, sizeof *f);
			if (f == NULL)
				return OUT_OF_MEMORY;
			strcpy(f->name, name);
			f->mod = m;
			*pf = f; /* leaked with the module, as handles are */
			return SUCCESS;
		}
	}
	return NOT_FOUND;
}

CUresult cuModuleUnload(CUmodule m) {
	ENTER("cuModuleUnload");
	NEEDCTX();
	if (m == NULL)
		return INVALID_HANDLE;
	pthread_mutex_lock(&smu);
	nmodules--;
	pthread_mutex_unlock(&smu);
	free(m->text);
	free(m);
	return SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			CUstream s, void **params, void **extra) {
	ENTER("cuLaunchKernel");
	NEEDCTX();
	if (f == NULL || gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
	    (unsigned long long)bx * by * bz > 1024 || shared > 48 * 1024 || extra != NULL)
		return INVALID_VALUE;
	struct op *o;
	if (strcmp(f->name, "gpustate_fake_fill") == 0) {
		if (params == NULL)
			return INVALID_VALUE;
		/* The parameters are read at launch, as the driver does. */
		CUdeviceptr dst = *(CUdeviceptr *)params[0];
		unsigned int value = *(unsigned int *)params[1];
		unsigned long long n = *(unsigned long long *)params[2];
		o = newop(OP_FILL);
		if (o == NULL)
			return OUT_OF_MEMORY;
		o->dst = (void *)(uintptr_t)dst;
		o->value = (unsigned char)value;
		o->n = n;
		o->check = dst;
		o->checkn = n;
	} else {
		o = newop(OP_NOP);
		if (o == NULL)
			return OUT_OF_MEMORY;
	}
	return push(s, o);
}
