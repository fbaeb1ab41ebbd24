/* tests/emu/sm90_emu.cpp — the Hopper GEMM of src/gemm_sm90.cu (TMA, mbarriers, wgmma, warp
 * specialisation, the persistent tile order, the TMA-store and deferred GLU epilogues, the fc2
 * dgrad + dGLU) compiled as host C++ and run block by block, each block's 384 threads as
 * coroutines (tests/emu/emu_threads.h) that switch at barriers, shuffles and mbarrier waits; its
 * PTX helpers are tests/emu/sm90_emu_ptx.h's (what they emulate, and how asynchronous operations
 * are ordered, is said there). Linked with tests/emu/gemm_emu.cpp built with
 * FASTGLU_HAVE_GEMM_SM90, whose fastglu_linear*_cuda entry points then take this kernel where it
 * applies (fastglu_gemm_sm90_supported) and the general kernel elsewhere, and run the float64
 * reference suites of tests/c/gemm_reference.c on both (test_gemm_sm90_emulation). A grid of
 * emu_sm_count (3) blocks, so that each block takes several tiles. */
#include <vector>

#define FASTGLU_HOST_EMULATION 1
#define GEMM_SM90_DEVICE 1
#define __shared__
#include "cuda_runtime.h"
#include "emu_threads.h"
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
#include "cuda_bf16.h"
#include "cuda_fp16.h"

/* the block's dynamic shared memory; a shared-memory address is an offset here */
alignas(1024) unsigned char smem_raw[228 * 1024];

/* the kernel's launches go to sm90_launch (below), not to the general kernel's emulation */
static cudaError_t sm90_launch(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                               cudaStream_t stream);
static cudaError_t sm90_launch_ex(const cudaLaunchConfig_t *cfg, const void *f, void **args);
#define cudaLaunchKernel sm90_launch
#define cudaLaunchKernelExC sm90_launch_ex
#include "gemm_sm90.cu"
#undef cudaLaunchKernel
#undef cudaLaunchKernelExC

/* ---- tensor maps --------------------------------------------------------------------------- */

static CUresult emu_encode_tiled(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank,
                                 void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                                 const cuuint32_t *box, const cuuint32_t *elem,
                                 CUtensorMapInterleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
    static_assert(sizeof(emu_tmap) <= sizeof(CUtensorMap), "emu_tmap fits a CUtensorMap");
    /* the driver's rules the kernel's maps must keep: 16-byte aligned base and strides, boxes of
     * at most 256 per dimension, the inner box within the swizzle span */
    if (rank != 2 || (uintptr_t)base % 16 || strides[0] % 16 || box[0] > 256 || box[1] > 256 ||
        elem[0] != 1 || elem[1] != 1 || dims[0] == 0 || dims[1] == 0 ||
        (dt != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && dt != CU_TENSOR_MAP_DATA_TYPE_FLOAT16) ||
        (swizzle == CU_TENSOR_MAP_SWIZZLE_128B && box[0] * 2 > 128))
        return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, sizeof *map);
    emu_tmap t;
    memset(&t, 0, sizeof t);
    t.base = (const unsigned char *)base;
    t.dims[0] = dims[0], t.dims[1] = dims[1], t.stride = strides[0];
    t.box[0] = box[0], t.box[1] = box[1], t.esize = 2;
    t.swizzle128 = swizzle == CU_TENSOR_MAP_SWIZZLE_128B;
    memcpy(map, &t, sizeof t);
    return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned,
                                             unsigned long long,
                                             cudaDriverEntryPointQueryResult *status) {
    const int ok = strcmp(symbol, "cuTensorMapEncodeTiled") == 0;
    *fn = ok ? (void *)emu_encode_tiled : NULL;
    *status = ok ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *, const cudaLaunchConfig_t *) {
    *n = emu_sm_count;
    return cudaSuccess;
}

/* ---- launches ------------------------------------------------------------------------------ */

static gemm_kernel_fn cur_kernel;
long sm90_launches, sm90_blocks;

/* launches by kernel: the epilogue (TS: through the TMA stores), the tile, the dtype */
typedef struct kernel_count {
    const char *name;
    gemm_kernel_fn bf16, f16;
    long n;
} kernel_count;
#define KC(name, ...)                                                                              \
    {name, gemm_sm90_kernel<__nv_bfloat16, __VA_ARGS__>, gemm_sm90_kernel<__half, __VA_ARGS__>, 0}
static kernel_count kernel_counts[] = {
    KC("plain TS 128x256", EPI_PLAIN, 1, 256, MM_ANY),
    KC("plain TS 128x192", EPI_PLAIN, 1, 192, MM_ANY),
    KC("plain TS 192x192", EPI_PLAIN, 1, 192, MM_ANY, GEMM_CLUSTER, 3),
    KC("plain registers 128x256", EPI_PLAIN, 0, 256, MM_ANY),
    KC("plain registers 128x192", EPI_PLAIN, 0, 192, MM_ANY),
    KC("GLU split TS MM_K", EPI_GLU_SPLIT, 1, 256, MM_K),
    KC("GLU split TS MM_KCLAMP", EPI_GLU_SPLIT, 1, 256, MM_KCLAMP),
    KC("GLU split TS MM_GELU", EPI_GLU_SPLIT, 1, 256, MM_GELU),
    KC("GLU split TS MM_ANY", EPI_GLU_SPLIT, 1, 256, MM_ANY),
    KC("GLU split registers", EPI_GLU_SPLIT, 0, 256, MM_ANY),
    KC("GLU interleaved registers", EPI_GLU_INTERLEAVED, 0, 256, MM_ANY),
    KC("dGLU TS MM_K", EPI_DGLU, 1, 256, MM_K),
    KC("dGLU TS MM_ANY", EPI_DGLU, 1, 256, MM_ANY),
    KC("dGLU registers", EPI_DGLU, 0, 256, MM_ANY),
    KC("dGLU dweights TS", EPI_DGLU_DW, 1, 256, MM_ANY),
    KC("dGLU dweights registers", EPI_DGLU_DW, 0, 256, MM_ANY),
};
#undef KC
static const int n_kernel_counts = (int)(sizeof kernel_counts / sizeof kernel_counts[0]);

static void run_sm90(void **args) {
    cur_kernel(*(const CUtensorMap *)args[0], *(const CUtensorMap *)args[1],
               *(const CUtensorMap *)args[2], *(const CUtensorMap *)args[3],
               *(const CUtensorMap *)args[4], *(const CUtensorMap *)args[5],
               *(const gemm_args *)args[6]);
}

/* no operation left pending by a block that ended: its TMA stores and wgmma groups all waited for;
 * the shared memory past the launch's size still the junk the block started with (a plain store
 * there, as the dweights sums' are, would have faulted on the GPU) */
static void sm90_check_pending(void) {
    for (size_t i = emu_smem_bytes; i < sizeof smem_raw; i++)
        if (smem_raw[i] != 0x5a) {
            fprintf(stderr,
                    "EMU: a block wrote shared memory at %zu, past the launch's %zu bytes\n", i,
                    emu_smem_bytes);
            abort();
        }
    if (!emu_pending_loads.empty()) {
        fprintf(stderr, "EMU: a block left %zu TMA loads no thread waited for\n",
                emu_pending_loads.size());
        abort();
    }
    for (int t = 0; t < 1024; t++)
        if (!emu_open_stores[t].empty() || !emu_store_groups[t].empty() ||
            !emu_open_mma[t].empty() || !emu_mma_groups[t].empty()) {
            fprintf(stderr,
                    "EMU: thread %d of a block left TMA stores or wgmma groups not waited "
                    "for\n",
                    t);
            abort();
        }
}
/* before each block: the block before checked, shared memory junk, no mbarrier */
static void sm90_block_start(void) {
    sm90_check_pending();
    memset(smem_raw, 0x5a, sizeof smem_raw);
    emu_mbars.clear();
    emu_loaded.clear();
    for (int t = 0; t < 1024; t++) emu_seen[t].clear();
    sm90_blocks++;
}

static cudaError_t sm90_launch(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                               cudaStream_t) {
    if (smem > sizeof smem_raw - 1024 || smem > 227 * 1024 || block.x % 128 || block.x > 512)
        return cudaErrorInvalidValue;
    cur_kernel = (gemm_kernel_fn)f;
    emu_smem_bytes = smem;
    memset(smem_raw, 0x5a, sizeof smem_raw); /* (the junk sm90_check_pending looks for) */
    sm90_launches++;
    for (int i = 0; i < n_kernel_counts; i++)
        if (cur_kernel == kernel_counts[i].bf16 || cur_kernel == kernel_counts[i].f16)
            kernel_counts[i].n++;
    emu_run_blocks(run_sm90, args, grid, block, sm90_block_start);
    sm90_check_pending(); /* the last block's */
    return cudaSuccess;
}

static cudaError_t sm90_launch_ex(const cudaLaunchConfig_t *cfg, const void *f, void **args) {
    for (unsigned i = 0; i < cfg->numAttrs; i++)
        if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension &&
            cfg->attrs[i].val.clusterDim.x != 1)
            return cudaErrorInvalidValue; /* clusters are not emulated */
    return sm90_launch(f, cfg->gridDim, cfg->blockDim, args, cfg->dynamicSmemBytes, cfg->stream);
}

/* prints the launches by kernel; returns the number of `required` kernels (names) never run */
extern "C" int sm90_emu_report(const char *const *required, int n_required) {
    printf("sm_90a kernel: %ld launches, %ld blocks, %ld TMA loads, %ld TMA stores, %ld wgmma "
           "(per thread)\n",
           sm90_launches, sm90_blocks, emu_tma_loads, emu_tma_stores, emu_mma_run);
    for (int i = 0; i < n_kernel_counts; i++)
        printf("  %-28s %ld launches\n", kernel_counts[i].name, kernel_counts[i].n);
    int missing = 0;
    for (int r = 0; r < n_required; r++)
        for (int i = 0; i < n_kernel_counts; i++)
            if (!strcmp(required[r], kernel_counts[i].name) && kernel_counts[i].n == 0) {
                printf("FAIL: the %s kernel was not run\n", required[r]);
                missing++;
            }
    return missing;
}
extern "C" long sm90_emu_launches(void) { return sm90_launches; }
