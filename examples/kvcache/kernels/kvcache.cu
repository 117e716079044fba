// Kernels of the kvcache example: prefill writes key or value rows into a
// paged cache, decode attends from one query over every cached row. Both
// reach rows through a block table: a device array holding the base address
// of each block of one field, rows_per_block rows of width floats each, so
// logical row r lives at table[r / rows_per_block] + (r % rows_per_block) * width.
//
// Built without the CUDA toolkit by LLVM's NVPTX backend:
//   clang -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib -O2 -S
// (make ptx). kernels.go holds the same kernels in Go for the host backend.

#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))

typedef unsigned int u32;
typedef unsigned long long u64;

static __attribute__((device)) inline u32 tid(void) { return __nvvm_read_ptx_sreg_tid_x(); }
static __attribute__((device)) inline u32 ntid(void) { return __nvvm_read_ptx_sreg_ntid_x(); }
static __attribute__((device)) inline u32 ctaid(void) { return __nvvm_read_ptx_sreg_ctaid_x(); }
static __attribute__((device)) inline u32 nctaid(void) { return __nvvm_read_ptx_sreg_nctaid_x(); }

// row returns the address of logical row r of a field through its table.
static __attribute__((device)) inline float *row(float *const *table, u32 rows_per_block, u64 r, u32 width) {
	return table[r / rows_per_block] + (r % rows_per_block) * (u64)width;
}

// kv_prefill copies nrows rows of width floats from src (device memory,
// row-major) to logical rows start_row.. of the field whose block table is
// table. Any grid: threads stride over the nrows*width floats.
extern "C" __global__ void kv_prefill(float *const *table, u32 rows_per_block, u64 start_row,
				      const float *src, u64 nrows, u32 width) {
	u64 n = nrows * width;
	for (u64 i = (u64)ctaid() * ntid() + tid(); i < n; i += (u64)nctaid() * ntid()) {
		u64 r = i / width;
		row(table, rows_per_block, start_row + r, width)[i % width] = src[i];
	}
}

// kv_decode attends from query (width = layers*dim floats) over the nrows
// cached rows of keys and values, one thread block per layer, and writes
// each layer's attention output (dim floats) to out at layer*dim. scores
// is device scratch of layers*nrows floats. scale multiplies each dot
// product (1/sqrt(dim)).
extern "C" __global__ void kv_decode(float *const *keys, float *const *values, u32 rows_per_block,
				     u32 nrows, u32 layers, u32 dim, const float *query, float scale,
				     float *out, float *scores) {
	u32 l = ctaid();
	if (l >= layers)
		return;
	u32 width = layers * dim;
	u32 off = l * dim;
	float *sc = scores + (u64)l * nrows;
	for (u32 j = tid(); j < nrows; j += ntid()) {
		const float *k = row(keys, rows_per_block, j, width) + off;
		float s = 0;
		for (u32 d = 0; d < dim; d++)
			s += query[off + d] * k[d];
		sc[j] = s * scale;
	}
	__syncthreads();
	__shared__ float norm[2];
	if (tid() == 0) {
		float m = -__builtin_inff();
		for (u32 j = 0; j < nrows; j++)
			m = sc[j] > m ? sc[j] : m;
		float sum = 0;
		for (u32 j = 0; j < nrows; j++) {
			// exp(x) = 2^(x*log2(e))
			float e = __nvvm_ex2_approx_f((sc[j] - m) * 1.4426950408889634f);
			sc[j] = e;
			sum += e;
		}
		norm[0] = sum;
	}
	__syncthreads();
	float sum = norm[0];
	for (u32 d = tid(); d < dim; d += ntid()) {
		float a = 0;
		for (u32 j = 0; j < nrows; j++)
			a += sc[j] / sum * row(values, rows_per_block, j, width)[off + d];
		out[off + d] = a;
	}
}
