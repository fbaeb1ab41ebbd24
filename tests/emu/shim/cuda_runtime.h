#pragma once
/* Host shim of the CUDA runtime for emulating the kernels sequentially (tests/emu). */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
extern dim3 blockIdx, threadIdx, gridDim, blockDim;
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { uint4 r = {a, b, c, d}; return r; }
static inline uint2 make_uint2(unsigned a, unsigned b) { uint2 r = {a, b}; return r; }
struct __attribute__((aligned(8))) float2 { float x, y; };
static inline float2 make_float2(float a, float b) { float2 r = {a, b}; return r; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
/* counters: accesses by kind, and any access not aligned to its own width */
extern long emu_misaligned, emu_ldg, emu_ldcs, emu_stcs, emu_ldplain;
template <typename W> static inline void emu_chk(const W *p) {
    if ((uintptr_t)p % sizeof(W)) { emu_misaligned++; fprintf(stderr, "misaligned %zu-byte access %p\n", sizeof(W), (const void *)p); }
}
template <typename W> static inline W emu_load(const W *p) { emu_chk(p); W v; memcpy(&v, p, sizeof v); return v; }
template <typename W> static inline W __ldg(const W *p) { emu_ldg++; return emu_load(p); }
template <typename W> static inline W __ldcs(const W *p) { emu_ldcs++; return emu_load(p); }
template <typename W> static inline W emu_ld_plain(const W *p) { emu_ldplain++; return emu_load(p); }
template <typename W> static inline void __stcs(W *p, W v) { emu_stcs++; emu_chk(p); memcpy(p, &v, sizeof v); }
/* a plain vector store (glu_cuda.cu's st.global.v4 / .v2) */
template <typename W> static inline void emu_st_plain(W *p, W v) { emu_chk(p); memcpy(p, &v, sizeof v); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
/* fp32 arithmetic with explicit rounding (the family's math, src/glu_math.h, takes its host branch
 * here: exp2f and a division for the sigmoid, as the CPU backend, so the two compare bit for bit;
 * the GPU's special-function unit differs from these by a few ulp), and the flush of subnormals
 * that gemm_emu.cpp's stand-in for rcp.approx.ftz uses. */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float emu_ftz(float x) { return fabsf(x) < 1.17549435e-38f ? copysignf(0.0f, x) : x; }
static inline float rcp_ftz(float x) { return emu_ftz(1.0f / emu_ftz(x)); }
typedef struct emu_stream *cudaStream_t;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorNoDevice = 100, cudaErrorInsufficientDriver = 35 };
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline const char *cudaGetErrorString(cudaError_t) { return "emu"; }
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrL2CacheSize = 89 };
/* an H200's L2 (60 MiB): the launchers' evict-last choice for the partials; compute capability
 * 9.0; emu_sm_count multiprocessors (emu_threads.cpp: a few, so that a persistent grid's blocks
 * take several tiles each) */
extern int emu_sm_count;
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? emu_sm_count : a == cudaDevAttrComputeCapabilityMajor ? 9 : a == cudaDevAttrComputeCapabilityMinor ? 0 : 60 << 20;
    return cudaSuccess;
}
/* the driver's entry points and cluster occupancy: tests/emu/sm90_emu.cpp */
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1 };
#define cudaEnableDefault 0ull
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version, unsigned long long flags, cudaDriverEntryPointQueryResult *status);
struct cudaFuncAttributes { int ptxVersion, binaryVersion; };
/* code for sm_90: the reduction is launched as a programmatic dependent */
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *) { a->ptxVersion = a->binaryVersion = 90; return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { memset(p, v, n); return cudaSuccess; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
static inline cudaError_t cudaFuncSetAttribute(const void *, cudaFuncAttribute, int v) { return v <= 227 * 1024 ? cudaSuccess : cudaErrorInvalidValue; }
enum cudaLaunchAttributeID { cudaLaunchAttributeClusterDimension = 4, cudaLaunchAttributeProgrammaticStreamSerialization = 5 };
union cudaLaunchAttributeValue { int programmaticStreamSerializationAllowed; struct { unsigned x, y, z; } clusterDim; char pad[64]; };
struct cudaLaunchAttribute { cudaLaunchAttributeID id; cudaLaunchAttributeValue val; };
struct cudaLaunchConfig_t { dim3 gridDim, blockDim; size_t dynamicSmemBytes; cudaStream_t stream; cudaLaunchAttribute *attrs; unsigned numAttrs; };
/* cudaLaunchKernel / cudaLaunchKernelExC: each emulation looks the kernel pointer up and runs the
 * grid (tests/emu/emu_threads.h runs it). */
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t stream);
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *func, void **args);
cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *func, const cudaLaunchConfig_t *cfg);
