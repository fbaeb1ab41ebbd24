/*
 * gemm_sm90.cu — the Hopper (sm_90a) GEMM behind gemm_internal.h: y = x @ w^T (F.linear), and fc1
 * with the gated-linear-unit epilogue. TMA loads, wgmma with fp32 accumulators, warp
 * specialisation, an mbarrier pipeline, a persistent grid with a grouped tile order.
 *
 * Block: 1 + NC warpgroups, one block per multiprocessor. Warpgroup 0 is the producer: one thread
 * issues the TMA loads of a STAGES-deep ring of shared-memory stages (A: BM = 64 NC rows x 64 k,
 * B: BN rows x 64 k, both 128-byte swizzled), its registers lowered with setmaxnreg. Warpgroups 1
 * to NC are consumers: each multiplies 64 rows of A by the BN rows of B with wgmma m64nBNk16 (BN /
 * 2 fp32 accumulators a thread), one wgmma group left in flight while the next k-block is issued.
 * The tile is 128 x 256 (NC 2); a plain GEMM takes 128 x 192 or 192 x 192 (NC 3) where that
 * costs fewer waves (choose_tile: N = 2880, 5760). 192 x 192 moves the fewest shared-memory bytes
 * per flop of the three (each consumer reads its 64 A rows and the whole B tile). The producer
 * runs ahead into the next tile while the consumers store. Three stages of 48 KB: a fourth
 * measured 2-7 % slower (bench/gemm/NOTES.md, version 10). The consumers share each tile
 * (cooperative) rather than taking 64-row tiles in turn (ping-pong, one warpgroup's epilogue
 * under the other's wgmma): ping-pong loads each B tile for 64 rows, 1.67x the L2 bytes per flop,
 * which costs what hiding the epilogue saves (bench/gemm/NOTES.md has the measurements). Tiles
 * are visited in a grouped order (group_m row tiles at a time) so that the tiles in flight share
 * rows of x and of w in L2 (group_of_tile). K tails and M/N edges read zeros (TMA's out-of-bounds
 * fill); the stores clip at [M, N].
 *
 * Epilogue: with 16-byte aligned outputs (plain and SPLIT), each consumer packs 64 x 64 chunks
 * into a double-buffered, swizzled staging buffer and one thread stores them with TMA, so the
 * copy engine drains a tile's output while the warpgroup starts the next tile (the stores leave
 * the consumers' critical path: bench/gemm/NOTES.md, version 2); otherwise (and for
 * INTERLEAVED) the pairs are stored from registers. The TMA-store SPLIT fc1 + GLU also defers the
 * activation into the next tile's main loop (GEMM_GLU_DEFER, glu_defer_pack): the
 * tensor cores no longer wait for it (bench/gemm/NOTES.md, version 17); the TMA-store fc2 dgrad +
 * dGLU likewise (GEMM_DGLU_DEFER, dglu_defer_pack; version 18).
 *
 * Clusters of 2 (the kernel's template parameter CL: GEMM_CLUSTER=2 for the whole build, or per
 * launch in the development build, fastglu_gemm_sm90_set_cluster, for the plain GEMM and the
 * TMA-store SPLIT) pair blocks on vertically adjacent tiles into a cluster that loads each B tile
 * once, half by each block, by TMA multicast; both blocks' consumers release a stage before either
 * producer refills it (the peer's arrive at the default .release.cta: with .release.cluster the
 * fence on every k-block costs 20-35%). It is not the default: beside the default build it reads
 * from -3% to +3% by shape, within the noise (bench/gemm/NOTES.md).
 *
 * Plain GEMM: the B tile is BN consecutive rows of w (two TMA boxes of BN / 2 rows); out = acc
 * (+ bias), rounded to the dtype.
 *
 * fc1 + GLU, SPLIT layout: two tensor maps over w, gate rows [0, F) and up rows [F, 2F), each an
 * [F, K] tensor (so an edge tile reads zeros, never the other half). The B tile is 128 gate rows
 * and the same 128 up rows; in wgmma's accumulator layout a thread holds, for n8 block i < 16, gate
 * columns 8i + 2q, 8i + 2q + 1 and in block i + 16 the up values of the same columns, so the GLU
 * needs no data exchange. INTERLEAVED layout (w row 2j gate j, 2j + 1 up j): a plain GEMM over the
 * 2F rows whose accumulator pairs (8i + 2q, 8i + 2q + 1) are (gate, up) of column j = (n0 + 8i +
 * 2q) / 2.
 *
 * Epilogue math: h = acc (+ bias) in fp32, rounded to the dtype and stored (when h is given); y =
 * glu_forward (glu_math.cuh) of the rounded gate and up with no bias (B = 0) and the per-token
 * weight. The standalone kernel clamps the raw operand and then adds its bias; here the bias is
 * already inside h, so y is exactly what the standalone kernel computes when given h with no bias
 * (the same function of h, the same bits), which is what the backward reads. The TMA-store SPLIT
 * kernel is compiled for the math modes the standalone kernels use (chosen by the same rule; they
 * give the same bits as the general mode, glu_math.cuh); the other epilogues use the general mode
 * (MM_ANY). A missing weight is 1: m_d * 1 * a = m_d * a exactly, the W = 0 path's value.
 *
 * fc2 dgrad + dGLU (EPI_DGLU, fastglu_linear_dglu_bwd_cuda): dY = dO @ w2 with w2 [K, F] row-major,
 * so B is MN-major: the producer loads it as BN / 64 TMA boxes of 64 k rows x 64 columns (128-byte
 * swizzle) and the consumers multiply with wgmma's transposed-B mode (tnspB = 1) through an
 * MN-major descriptor (smem_desc_mn). The tile is 128 tokens x 256 columns of dY. The consumers
 * prefetch the tile's h rows (gate and up) to L2 GEMM_DGLU_PREFETCH_KB k-blocks before the main loop
 * ends (not on the TMA-store path below, whose TMA loads come early: GEMM_DGLU_STEPS_PREFETCH); the
 * epilogue (epilogue_dglu) takes 64 columns at a time: the chunk's gate and up pairs of h (SPLIT)
 * loaded as one batch, the family's backward (glu_backward<MM, 0, 1>, no bias: fc1's is
 * inside h; on the TMA-store path MM is the math mode of the standalone kernels, the same bits as
 * the general mode MM_ANY with fewer instructions) on dY rounded to the dtype (a separate GEMM's
 * output: the unfused path's value), which also gives y from its own activation (glu_grads.y: the
 * forward's operations on the same values, no second sigmoid), then d_gate, d_up and y through the
 * TMA-store staging (16-byte aligned outputs) or from registers. On the TMA-store path the
 * epilogue runs in steps deferred into the next tile's main loop (GEMM_DGLU_DEFER,
 * dglu_defer_step), h coming by TMA into the staging buffers (five a consumer warpgroup) instead
 * of the loads above.
 * dweights (EPI_DGLU_DW) needs each token's sum over all F columns: the grid walks row tiles, a
 * block taking every column tile of its row tile in order (block_tile), each row's sum over the
 * tile's columns made by one thread in column order and by its four lanes in a fixed tree, the
 * running sum over the column tiles kept in shared memory: deterministic, one block per 128 tokens
 * (fewer blocks than multiprocessors below 128 x 132 tokens, far faster still than the general
 * kernel's FMA loop). GEMM_SM90_DGLU=0 turns the dgrad over to the general kernel.
 *
 * Bitwise deterministic: each output element is one thread's fixed sequence of wgmma k-steps.
 */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "gemm_internal.h"
#include "glu_math.cuh"

#include <string.h>

#define GEMM_BM 128
#define GEMM_BN 256
#define GEMM_BK 64
#ifndef GEMM_STAGES
#define GEMM_STAGES 3
#endif
#ifndef GEMM_GROUP_M
#define GEMM_GROUP_M 0 /* the tile order's group: 0 chooses by tile (group_of_tile) */
#endif
#ifndef GEMM_WAIT_DEPTH
#define GEMM_WAIT_DEPTH 1 /* wgmma groups left in flight while the next k-block is issued */
#endif
#ifndef GEMM_CLUSTER
#define GEMM_CLUSTER                                                                               \
    1 /* 2: pairs of blocks on vertically adjacent tiles share B by TMA multicast */
#endif
/* 1: the TMA-store SPLIT fc1 + GLU defers a tile's activation into the next tile's main loop
 * (glu_defer_pack / glu_defer_step, GEMM_WAIT_DEPTH 1); 0: the whole epilogue after the tile's main
 * loop */
#ifndef GEMM_GLU_DEFER
#define GEMM_GLU_DEFER 1
#endif
/* 1: the TMA-store fc2 dgrad + dGLU defers a tile's epilogue into the next tile's main loop
 * (dglu_defer_pack / dglu_defer_step, GEMM_WAIT_DEPTH 1); 0: its steps after the tile's main loop */
#ifndef GEMM_DGLU_DEFER
#define GEMM_DGLU_DEFER 1
#endif
/* 1: the deferred epilogues' steps spread over the next tile's main loop, one every
 * GEMM_DEFER_EVERY(num_k_blocks, events) k-blocks, so that their stores (and the dGLU's h loads)
 * reach DRAM as a steady stream beside the main loop's instead of one burst in every block at once
 * in the first k-blocks; 0: a step every k-block from the first */
#ifndef GEMM_DEFER_SPREAD
#define GEMM_DEFER_SPREAD 1
#endif
/* the k-blocks between two steps: the fc1 + GLU has 8 events a tile (its steps), the dGLU
 * GEMM_DGLU_NSTEPS + 1 (its steps, then the next tile's first h loads, dglu_h_first); 1 when the
 * main loop has fewer than two k-blocks an event */
#define GEMM_DEFER_EVERY(nkb, events)                                                              \
    (GEMM_DEFER_SPREAD && (nkb) >= 2 * (events) ? (nkb) / (events) : 1)
/* the dGLU's steps: 4 n8 blocks (32 columns, half a 64-column chunk) a step, so 8 steps a tile (a
 * warpgroup's 64 rows x 256 columns: 4 chunks of 8 n8 blocks). Steps of 2 or 1 n8 blocks, or a
 * step before the previous k-block's wgmma wait, were slower (bench/gemm/NOTES.md, versions 21-22) */
#define GEMM_DGLU_STEP_BLOCKS 4
#define GEMM_DGLU_NSTEPS (32 / GEMM_DGLU_STEP_BLOCKS)
#define GEMM_DGLU_CHUNK_STEPS (8 / GEMM_DGLU_STEP_BLOCKS)
/* 1: the dGLU's steps (h by TMA) also prefetch the tile's h rows to L2 (dglu_prefetch); 0: not,
 * since each chunk's TMA load is issued steps ahead of its use and the prefetch's burst of a tile's
 * h only competed with them (2-4 % slower with it, bench/gemm/NOTES.md version 20) */
#ifndef GEMM_DGLU_STEPS_PREFETCH
#define GEMM_DGLU_STEPS_PREFETCH 0
#endif
/* 2: the staging wait of the TMA-store epilogue left out (racy: for timing its cost only) */
#ifndef GEMM_DEV_EPI
#define GEMM_DEV_EPI 0
#endif
/* a stage holds BM + BN = 384 rows of 64 k: 128 x 256 or 192 x 192 (NC = 3 consumer warpgroups) */
#define GEMM_STAGE_BYTES (384 * GEMM_BK * 2)
/* the TMA-store epilogue's staging: per consumer warpgroup GEMM_OUT_BUFS buffers of 64 rows x 64
 * columns (a power of two) */
#ifndef GEMM_OUT_BUFS
#define GEMM_OUT_BUFS 2
#endif
#define GEMM_OUT_BUF_BYTES (64 * 64 * 2)
/* the TMA-store fc2 dgrad + dGLU's buffers a consumer warpgroup: h's gate and up of two chunks
 * (loaded by TMA; a chunk's d_gate and d_up are written over them and stored from there) and y */
#define GEMM_DGLU_OUT_BUFS 5
/* stages, output buffers (per consumer warpgroup), the full and empty barriers, the dweights
 * partial of the tile's tokens (EPI_DGLU_DW), the dGLU's two h-load barriers a consumer
 * warpgroup, 1024 bytes of slack to align the ring (128-byte swizzle); nc consumer warpgroups */
#define GEMM_SMEM_BYTES_OB(nc, ob)                                                                 \
    (GEMM_STAGES * GEMM_STAGE_BYTES + (nc) * (ob) * GEMM_OUT_BUF_BYTES + 1024 +                    \
     2 * GEMM_STAGES * 8 + 64 * (nc) * 4 + 16 * (nc))
#define GEMM_SMEM_BYTES(nc) GEMM_SMEM_BYTES_OB(nc, GEMM_OUT_BUFS)

/* EPI_DGRAD and EPI_DGLU_OLD exist for the development hooks only (bench/gemm/sm90_dev.py --dglu):
 * the dgrad's MN-major main loop with the plain epilogue (dY rounded into dh's gate half), and the
 * dGLU epilogue that loads h pair by pair between its stores, kept to be timed beside EPI_DGLU. */
enum {
    EPI_PLAIN = 0,
    EPI_GLU_SPLIT = 1,
    EPI_GLU_INTERLEAVED = 2,
    EPI_DGLU = 3,
    EPI_DGRAD = 4,
    EPI_DGLU_OLD = 5,
    EPI_DGLU_DW = 6 /* EPI_DGLU with dweights: row-owner schedule, the sum kept in shared memory */
};
/* the dGLU's epilogue in steps with h by TMA (dglu_defer_step): EPI_DGLU through TMA stores (ts);
 * the kernel, its shared-memory layout and the launch's maps all take it from here */
#define GEMM_DGLU_STEPS(e, ts) ((e) == EPI_DGLU && (ts))
/* the TMA-store epilogue's staging buffers a consumer warpgroup (ts: outputs through TMA stores):
 * the dGLU's steps hold h's gate and up of two chunks and y; the kernel's layout and the launch's
 * shared memory both take it from here */
#define GEMM_OUT_BUFS_OF(e, ts) (GEMM_DGLU_STEPS(e, ts) ? GEMM_DGLU_OUT_BUFS : GEMM_OUT_BUFS)
/* B is w2 [K, N], MN-major: the fc2 dgrad's main loop */
#define EPI_MN_MAJOR(e)                                                                            \
    ((e) == EPI_DGLU || (e) == EPI_DGRAD || (e) == EPI_DGLU_OLD || (e) == EPI_DGLU_DW)
/* EPI_DGLU and EPI_DGLU_DW: the tile's h rows are prefetched to L2 this many k-blocks before
 * the main loop ends (the register epilogues; the TMA-store steps only with
 * GEMM_DGLU_STEPS_PREFETCH) */
#ifndef GEMM_DGLU_PREFETCH_KB
#define GEMM_DGLU_PREFETCH_KB 16
#endif

/* 0 turns the fc2 dgrad + dGLU problem over to the general kernel (fastglu_gemm_sm90_supported
 * refuses it; its kernels are not compiled) */
#ifndef GEMM_SM90_DGLU
#define GEMM_SM90_DGLU 1
#endif

typedef struct gemm_args {
    int64_t M, N;         /* N: output columns of the plain GEMM; F with the GLU */
    int num_k_blocks;     /* ceil(K / 64) */
    int tiles_m, tiles_n; /* tile grid */
    int group_m;          /* tile order: group_m row tiles at a time */
    const void *bias;
    const void *weights;
    int weights_dtype;
    int64_t weights_stride;
    void *h;
    int64_t h_row_stride;
    void *y;
    int64_t y_row_stride;
    void *dh; /* EPI_DGLU: [M, 2F]; h (above) is then the saved input */
    int64_t dh_row_stride;
    void *dweights; /* EPI_DGLU_DW: [M] of weights_dtype */
    int64_t dweights_stride;
    glu_math m;
} gemm_args;

/* ---- PTX: mbarrier, TMA, wgmma ------------------------------------------------------------ */

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GEMM_SM90_DEVICE 1
#endif

/* The device helpers exist only where the kernel's body does (sm_90a), so that a build for other
 * targets compiles this file to empty kernels without unused-function warnings. */
#if !defined(__CUDA_ARCH__) || defined(GEMM_SM90_DEVICE)

/* Shared-memory matrix descriptor, K-major with the 128-byte swizzle: rows of 128 bytes, 8-row
 * atoms 1024 bytes apart (stride byte offset), leading byte offset unused (1). */
static __device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

/* The MN-major (transposed) B operand of the dgrad, w2 [K, N] row-major: TMA boxes of 64 k rows
 * x 64 n (128 bytes, 128-byte swizzled), the BN / 64 boxes of a stage 8192 bytes apart. wgmma's
 * canonical MN-major 128-byte-swizzle layout ((T,8,n),(8,k)):((1,T,LBO),(8T,SBO)): LBO = 8192
 * (the next 64 columns of n), SBO = 1024 (the next 8 rows of k); a k16 step is 2048 bytes on. */
static __device__ __forceinline__ uint64_t smem_desc_mn(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(8192 >> 4) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

#ifdef FASTGLU_HOST_EMULATION
/* tests/emu/sm90_emu_ptx.h: the same helpers on the host (tests/emu/sm90_emu.cpp), where TMA,
 * mbarriers and wgmma are emulated on the emulation's shared memory */
#include "sm90_emu_ptx.h"
#else
static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* 2-d tile load: coordinates (k, row), completion on `bar` */
static __device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map,
                                                   uint32_t bar, int k, int row) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(k), "r"(row)
                 : "memory");
}
/* 2-d tile store from shared memory (the box clips at the tensor's edges), its bulk group */
static __device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, uint32_t src, int col,
                                                    int row) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
            (uint64_t)map),
        "r"(src), "r"(col), "r"(row)
        : "memory");
}
static __device__ __forceinline__ void bulk_commit(void) {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
/* this thread's bulk groups but the newest N have read their shared memory */
template <int N> static __device__ __forceinline__ void bulk_wait_read(void) {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void bulk_wait_all(void) {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
static __device__ __forceinline__ void fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
static __device__ __forceinline__ void named_bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
/* thread-block clusters: the pair shares each B tile, each block loading one half for both */
static __device__ __forceinline__ uint32_t cluster_ctarank(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
static __device__ __forceinline__ void cluster_sync(void) {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
/* arrive on the barrier at the same shared-memory offset in block `peer` of the cluster */
static __device__ __forceinline__ void mbar_arrive_peer(uint32_t bar, uint32_t peer) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, "
                 "%1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}" ::"r"(bar),
                 "r"(peer)
                 : "memory");
}
/* 2-d tile load written to the same offset in every block of `mask`, completing on each one's
 * barrier at offset `bar` */
static __device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const CUtensorMap *map,
                                                      uint32_t bar, int k, int row, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes."
                 "multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(k), "r"(row), "h"(mask)
                 : "memory");
}
static __device__ __forceinline__ void wgmma_fence(void) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
static __device__ __forceinline__ void wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> static __device__ __forceinline__ void wgmma_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int TB>
static __device__ __forceinline__ void wgmma_m64n256k16_bf16(float *d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
        "%111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
        "%127"
        "}, %128, %129, p, 1, 1, 0, %130;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wgmma_m64n256k16_f16(float *d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
        "%111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
        "%127"
        "}, %128, %129, p, 1, 1, 0, %130;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wgmma_m64n192k16_bf16(float *d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, %96, %97, p, 1, 1, 0, %98;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(da), "l"(db), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wgmma_m64n192k16_f16(float *d, uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, %96, %97, p, 1, 1, 0, %98;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(da), "l"(db), "n"(TB));
}

static __device__ __forceinline__ void fence_mbarrier_init(void) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
/* the producer warpgroup's registers down to 40 a thread, the consumers' up to R */
static __device__ __forceinline__ void setmaxnreg_dec40(void) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
}
template <int R> static __device__ __forceinline__ void setmaxnreg_inc(void) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
static __device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
static __device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
static __device__ __forceinline__ void prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

#endif /* FASTGLU_HOST_EMULATION */

/* ---- epilogue helpers ---------------------------------------------------------------------- */

static __device__ __forceinline__ void store2(__nv_bfloat16 *p, float a, float b) {
    *(__nv_bfloat162 *)p = __floats2bfloat162_rn(a, b);
}
static __device__ __forceinline__ void store2(__half *p, float a, float b) {
    *(__half2 *)p = __floats2half2_rn(a, b);
}
/* two consecutive elements (4-byte aligned) as fp32 */
static __device__ __forceinline__ void load2(const __nv_bfloat16 *p, float *a, float *b) {
    const float2 v = __bfloat1622float2(*(const __nv_bfloat162 *)p);
    *a = v.x, *b = v.y;
}
static __device__ __forceinline__ void load2(const __half *p, float *a, float *b) {
    const float2 v = __half22float2(*(const __half2 *)p);
    *a = v.x, *b = v.y;
}
/* x rounded to T (round to nearest even), back in fp32 */
template <typename T> static __device__ __forceinline__ float round_to(float x) {
    T t;
    from_f32(&t, x);
    return to_f32(t);
}
/* Unit t of the grouped order: group row units, all their column tiles, then the next group. A
 * unit is CL vertically adjacent tiles (one a block of the cluster). */
template <int CL>
static __device__ __forceinline__ void tile_coords(const gemm_args &a, int t, int *tm, int *tn) {
    const int units_m = (a.tiles_m + CL - 1) / CL;
    const int group = max(a.group_m / CL, 1);
    const int per_group = group * a.tiles_n;
    const int g = t / per_group, first = g * group;
    const int gs = min(units_m - first, group);
    const int r = t - g * per_group;
    *tm = first + r % gs;
    *tn = r / gs;
}

/* The u-th tile (u = 0, 1, ...) of this block, 0 past its last; the producer and the consumers walk
 * the same sequence. Persistent order: units blockIdx / CL + u * (grid / CL) of the grouped order,
 * row tile rank of the unit. Row-owner order (EPI_DGLU_DW, CL 1): row tiles blockIdx + k * grid,
 * each with its column tiles in order, so that a token's dweights sum stays in one block, in a
 * fixed order. */
template <int EPI, int CL>
static __device__ __forceinline__ int block_tile(const gemm_args &a, int u, int rank, int *tm,
                                                 int *tn) {
    if (EPI == EPI_DGLU_DW) {
        const int64_t r = blockIdx.x + (int64_t)(u / a.tiles_n) * gridDim.x;
        if (r >= a.tiles_m) return 0;
        *tm = (int)r, *tn = u % a.tiles_n;
        return 1;
    }
    const int64_t t = (int64_t)(blockIdx.x / CL) + (int64_t)u * (gridDim.x / CL);
    if (t >= (int64_t)((a.tiles_m + CL - 1) / CL) * a.tiles_n) return 0;
    tile_coords<CL>(a, (int)t, tm, tn);
    *tm = *tm * CL + rank; /* past the last row tile: computes zeros, stores nothing */
    return 1;
}

/* One consumer warpgroup's 64 x 256 accumulators (rows r0 + {0, 8} of each n8 block i, columns
 * 8i + 2q + {0, 1}: wgmma's layout) to h / y. */
template <typename T, int EPI, int BN>
static __device__ __forceinline__ void epilogue(const gemm_args &a, const float *d, int tm, int tn,
                                                int c) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, q = lane % 4;
    const int64_t r0 = (int64_t)tm * GEMM_BM + c * 64 + warp * 16 + lane / 4;
    const T *bias = (const T *)a.bias;
    T *h = (T *)a.h;
    if (EPI == EPI_PLAIN) {
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
            const int64_t col =
                (int64_t)tn * BN + 8 * i + 2 * q; /* N % 8 == 0: the pair is in or out */
            if (col < a.N) {
                float b0 = 0.0f, b1 = 0.0f;
                if (bias) b0 = to_f32(bias[col]), b1 = to_f32(bias[col + 1]);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int64_t row = r0 + 8 * e;
                    if (row < a.M) {
                        float v0 = d[4 * i + 2 * e], v1 = d[4 * i + 2 * e + 1];
                        if (bias) v0 = __fadd_rn(v0, b0), v1 = __fadd_rn(v1, b1);
                        store2(h + row * a.h_row_stride + col, v0, v1);
                    }
                }
            }
        }
        return;
    }
    T *y = (T *)a.y;
    float w[2] = {1.0f, 1.0f};
#pragma unroll
    for (int e = 0; e < 2; e++)
        if (a.weights && r0 + 8 * e < a.M)
            w[e] = load_token_weight(a.weights, a.weights_dtype, (r0 + 8 * e) * a.weights_stride);
    if (EPI == EPI_DGLU_OLD) { /* SPLIT: dY columns j of the tile; gate h[:, j], up h[:, F + j] */
        const int64_t F = a.N;
        T *dh = (T *)a.dh;
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
            const int64_t col =
                (int64_t)tn * BN + 8 * i + 2 * q; /* F % 8 == 0: the pair is in or out */
            if (col < F) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int64_t row = r0 + 8 * e;
                    if (row < a.M) {
                        const T *hr = h + row * a.h_row_stride;
                        float g0, g1, u0, u1;
                        load2(hr + col, &g0, &g1);
                        load2(hr + F + col, &u0, &u1);
                        const glu_grads r0g = glu_backward<MM_ANY, 0, 1>(
                            a.m, g0, u0, 0.0f, 0.0f, w[e], round_to<T>(d[4 * i + 2 * e]));
                        const glu_grads r1g = glu_backward<MM_ANY, 0, 1>(
                            a.m, g1, u1, 0.0f, 0.0f, w[e], round_to<T>(d[4 * i + 2 * e + 1]));
                        T *dr = dh + row * a.dh_row_stride;
                        store2(dr + col, r0g.dg, r1g.dg);
                        store2(dr + F + col, r0g.du, r1g.du);
                        if (y)
                            store2(y + row * a.y_row_stride + col,
                                   glu_forward<MM_ANY, 0, 1>(a.m, g0, u0, 0.0f, 0.0f, w[e]),
                                   glu_forward<MM_ANY, 0, 1>(a.m, g1, u1, 0.0f, 0.0f, w[e]));
                    }
                }
            }
        }
    } else if (EPI == EPI_GLU_SPLIT) {
        const int64_t F = a.N;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int64_t col =
                (int64_t)tn * (GEMM_BN / 2) + 8 * i + 2 * q; /* gate column j; up is F + j */
            if (col < F) {
                float bg0 = 0.0f, bg1 = 0.0f, bu0 = 0.0f, bu1 = 0.0f;
                if (bias) {
                    bg0 = to_f32(bias[col]), bg1 = to_f32(bias[col + 1]);
                    bu0 = to_f32(bias[F + col]), bu1 = to_f32(bias[F + col + 1]);
                }
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int64_t row = r0 + 8 * e;
                    if (row < a.M) {
                        float g0 = d[4 * i + 2 * e], g1 = d[4 * i + 2 * e + 1];
                        float u0 = d[4 * (i + 16) + 2 * e], u1 = d[4 * (i + 16) + 2 * e + 1];
                        if (bias) {
                            g0 = __fadd_rn(g0, bg0), g1 = __fadd_rn(g1, bg1);
                            u0 = __fadd_rn(u0, bu0), u1 = __fadd_rn(u1, bu1);
                        }
                        g0 = round_to<T>(g0), g1 = round_to<T>(g1), u0 = round_to<T>(u0),
                        u1 = round_to<T>(u1);
                        if (h) {
                            store2(h + row * a.h_row_stride + col, g0, g1);
                            store2(h + row * a.h_row_stride + F + col, u0, u1);
                        }
                        const float y0 = glu_forward<MM_ANY, 0, 1>(a.m, g0, u0, 0.0f, 0.0f, w[e]);
                        const float y1 = glu_forward<MM_ANY, 0, 1>(a.m, g1, u1, 0.0f, 0.0f, w[e]);
                        store2(y + row * a.y_row_stride + col, y0, y1);
                    }
                }
            }
        }
    } else { /* EPI_GLU_INTERLEAVED: h column 2j gate j, 2j + 1 up j */
        const int64_t N2 = 2 * a.N;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int64_t col = (int64_t)tn * GEMM_BN + 8 * i + 2 * q;
            if (col < N2) {
                float bg = 0.0f, bu = 0.0f;
                if (bias) bg = to_f32(bias[col]), bu = to_f32(bias[col + 1]);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int64_t row = r0 + 8 * e;
                    if (row < a.M) {
                        float g = d[4 * i + 2 * e], u = d[4 * i + 2 * e + 1];
                        if (bias) g = __fadd_rn(g, bg), u = __fadd_rn(u, bu);
                        g = round_to<T>(g), u = round_to<T>(u);
                        if (h) store2(h + row * a.h_row_stride + col, g, u);
                        from_f32(y + row * a.y_row_stride + col / 2,
                                 glu_forward<MM_ANY, 0, 1>(a.m, g, u, 0.0f, 0.0f, w[e]));
                    }
                }
            }
        }
    }
}

/* ---- the TMA-store epilogue ----------------------------------------------------------------
 * A consumer warpgroup writes its 64 x 256 result as 64 x 64 chunks: packed into one of its two
 * staging buffers (128-byte swizzled: a warp's 8 rows land in 8 different 16-byte columns, no bank
 * conflict), then one thread stores the chunk with TMA, which clips at the tensor's edges, and the
 * warpgroup moves on while the copy engine drains it. A buffer is reused once the store issued two
 * chunks earlier has read it. */
typedef struct out_stage {
    uint32_t buf;  /* the warpgroup's first buffer */
    int c;         /* consumer warpgroup: named barrier 1 + c */
    unsigned n;    /* chunks issued so far (buffer n % 2) */
    uint32_t hbar; /* the dGLU's steps: the h loads' barriers, one per chunk parity */
    uint32_t hph;  /* the phase parity each of them waits for next (bit p: barrier p) */
} out_stage;

static __device__ __forceinline__ uint32_t pack2(__nv_bfloat16 *, float a, float b) {
    __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *(uint32_t *)&v;
}
static __device__ __forceinline__ uint32_t pack2(__half *, float a, float b) {
    __half2 v = __floats2half2_rn(a, b);
    return *(uint32_t *)&v;
}

/* v[2 i' + e]: the thread's pair of n8 block i' (0..7) of the chunk, row 8 e of its two */
static __device__ __forceinline__ void put_chunk(out_stage *st, const CUtensorMap *map,
                                                 const uint32_t *v, int col, int row) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, lt = threadIdx.x % 128;
    const uint32_t buf = st->buf + (st->n % GEMM_OUT_BUFS) * GEMM_OUT_BUF_BYTES;
#if GEMM_DEV_EPI != 2
    if (lt == 0) bulk_wait_read<GEMM_OUT_BUFS - 1>();
#endif
    named_bar_sync(1 + st->c, 128);
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int r = warp * 16 + lane / 4 + 8 * e;
            const uint32_t addr = buf + r * 128 + ((i ^ (lane / 4)) << 4) + 4 * (lane % 4);
            st_shared_u32(addr, v[2 * i + e]);
        }
    fence_proxy_async();
    named_bar_sync(1 + st->c, 128);
    if (lt == 0) {
        tma_store_2d(map, buf, col, row);
        bulk_commit();
    }
    st->n++;
}

/* h's pair as two fp32 values */
static __device__ __forceinline__ void unpack2(__nv_bfloat16 *, uint32_t v, float *a, float *b) {
    __nv_bfloat162 t;
    memcpy(&t, &v, 4);
    const float2 f = __bfloat1622float2(t);
    *a = f.x, *b = f.y;
}
static __device__ __forceinline__ void unpack2(__half *, uint32_t v, float *a, float *b) {
    __half2 t;
    memcpy(&t, &v, 4);
    const float2 f = __half22float2(t);
    *a = f.x, *b = f.y;
}

/* ---- the deferred SPLIT fc1 + GLU epilogue (GEMM_GLU_DEFER) ----------------------------------
 * The activation is most of the fused epilogue's instructions (a sigmoid, two rounding steps and a
 * product per element, ~2 us of a ~36 us tile at T = 8192, H = 4096), and in the cooperative
 * schedule the tensor cores wait for it: both consumer warpgroups run it between two tiles. Here a
 * tile's main loop ends with h (+ bias) rounded to the dtype and packed, 64 words a thread
 * (glu_defer_pack); the next tile's main loop then runs the activation an eighth at a time, one
 * step every GEMM_DEFER_EVERY(num_k_blocks, 8) k-blocks from its first (GEMM_DEFER_SPREAD: the
 * stores spread over the loop), each after the previous k-block's stage went back to the producer
 * and while this k-block's wgmma runs (glu_defer_at), so the tensor cores work meanwhile. Steps 0
 * and 4 first store h's chunk (gate and up, 64 columns) from the packed words, then the y pairs
 * overwrite the gate words, and steps 3 and 7 store y's chunk. A tile whose main loop ends before
 * the eight steps, and the block's last tile, finish them after their main loop. Without the
 * deferral (GEMM_GLU_DEFER 0 or GEMM_WAIT_DEPTH 0) epilogue_tma runs all eight steps right after
 * the pack: the same operations, so the same bits. */
typedef struct glu_pending {
    uint32_t g[32], u[32]; /* chunk j, n8 block i, row 8 e: word 16 j + 2 i + e */
    float w[2];            /* the token weights of the thread's two rows */
    int tm, tn;            /* the tile's coordinates; tm < 0: nothing pending */
} glu_pending;

template <typename T, int BM>
static __device__ __forceinline__ void glu_defer_pack(const gemm_args &a, const float *d, int tm,
                                                      int tn, int c, glu_pending *pd) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, q = lane % 4;
    const int row0 = tm * BM + c * 64;
    const int64_t F = a.N;
    const T *bias = (const T *)a.bias;
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int64_t r = (int64_t)row0 + warp * 16 + lane / 4 + 8 * e;
        pd->w[e] = a.weights && r < a.M
                       ? load_token_weight(a.weights, a.weights_dtype, r * a.weights_stride)
                       : 1.0f;
    }
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int64_t col = (int64_t)tn * (GEMM_BN / 2) + 64 * j + 8 * i + 2 * q;
            float bg0 = 0.0f, bg1 = 0.0f, bu0 = 0.0f, bu1 = 0.0f;
            if (bias && col < F) {
                bg0 = to_f32(bias[col]), bg1 = to_f32(bias[col + 1]);
                bu0 = to_f32(bias[F + col]), bu1 = to_f32(bias[F + col + 1]);
            }
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float g0 = d[4 * (8 * j + i) + 2 * e], g1 = d[4 * (8 * j + i) + 2 * e + 1];
                float u0 = d[4 * (8 * j + i + 16) + 2 * e],
                      u1 = d[4 * (8 * j + i + 16) + 2 * e + 1];
                if (bias) {
                    g0 = __fadd_rn(g0, bg0), g1 = __fadd_rn(g1, bg1);
                    u0 = __fadd_rn(u0, bu0), u1 = __fadd_rn(u1, bu1);
                }
                pd->g[16 * j + 2 * i + e] = pack2((T *)0, g0, g1);
                pd->u[16 * j + 2 * i + e] = pack2((T *)0, u0, u1);
            }
        }
    pd->tm = tm, pd->tn = tn;
}

/* Step S (0..7) of the pending tile: chunk j = S / 4, n8 blocks [2 (S % 4), 2 (S % 4) + 2) */
template <typename T, int MM, int BM, int S>
static __device__ __forceinline__ void
glu_defer_step(const gemm_args &a, glu_pending *pd, out_stage *st, const CUtensorMap *map_h0,
               const CUtensorMap *map_h1, const CUtensorMap *map_y) {
    constexpr int j = S / 4, i0 = 2 * (S % 4);
    const int col0 = pd->tn * (GEMM_BN / 2) + 64 * j, row0 = pd->tm * BM + st->c * 64;
    if (S % 4 == 0 && a.h) {
        put_chunk(st, map_h0, &pd->g[16 * j], col0, row0);
        put_chunk(st, map_h1, &pd->u[16 * j], col0, row0);
    }
#pragma unroll
    for (int i = i0; i < i0 + 2; i++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int k = 16 * j + 2 * i + e;
            float g0, g1, u0, u1;
            unpack2((T *)0, pd->g[k], &g0, &g1);
            unpack2((T *)0, pd->u[k], &u0, &u1);
            const float y0 = glu_forward<MM, 0, 1>(a.m, g0, u0, 0.0f, 0.0f, pd->w[e]);
            const float y1 = glu_forward<MM, 0, 1>(a.m, g1, u1, 0.0f, 0.0f, pd->w[e]);
            pd->g[k] = pack2((T *)0, y0, y1);
        }
    if (S % 4 == 3) put_chunk(st, map_y, &pd->g[16 * j], col0, row0);
}

/* the pending tile's steps from `from` to 7 (from is warp-uniform) */
template <typename T, int MM, int BM>
static __device__ __forceinline__ void
glu_defer_rest(const gemm_args &a, glu_pending *pd, int from, out_stage *st,
               const CUtensorMap *map_h0, const CUtensorMap *map_h1, const CUtensorMap *map_y) {
    if (from <= 0) glu_defer_step<T, MM, BM, 0>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 1) glu_defer_step<T, MM, BM, 1>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 2) glu_defer_step<T, MM, BM, 2>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 3) glu_defer_step<T, MM, BM, 3>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 4) glu_defer_step<T, MM, BM, 4>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 5) glu_defer_step<T, MM, BM, 5>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 6) glu_defer_step<T, MM, BM, 6>(a, pd, st, map_h0, map_h1, map_y);
    if (from <= 7) glu_defer_step<T, MM, BM, 7>(a, pd, st, map_h0, map_h1, map_y);
    pd->tm = -1;
}

/* step S of the pending tile, if S < 8 (S is warp-uniform) */
template <typename T, int MM, int BM>
static __device__ __forceinline__ void
glu_defer_at(const gemm_args &a, glu_pending *pd, int S, out_stage *st, const CUtensorMap *map_h0,
             const CUtensorMap *map_h1, const CUtensorMap *map_y) {
    switch (S) {
    case 0: glu_defer_step<T, MM, BM, 0>(a, pd, st, map_h0, map_h1, map_y); break;
    case 1: glu_defer_step<T, MM, BM, 1>(a, pd, st, map_h0, map_h1, map_y); break;
    case 2: glu_defer_step<T, MM, BM, 2>(a, pd, st, map_h0, map_h1, map_y); break;
    case 3: glu_defer_step<T, MM, BM, 3>(a, pd, st, map_h0, map_h1, map_y); break;
    case 4: glu_defer_step<T, MM, BM, 4>(a, pd, st, map_h0, map_h1, map_y); break;
    case 5: glu_defer_step<T, MM, BM, 5>(a, pd, st, map_h0, map_h1, map_y); break;
    case 6: glu_defer_step<T, MM, BM, 6>(a, pd, st, map_h0, map_h1, map_y); break;
    case 7:
        glu_defer_step<T, MM, BM, 7>(a, pd, st, map_h0, map_h1, map_y);
        pd->tm = -1;
        break;
    default: break;
    }
}

template <typename T, int EPI, int BN, int MM, int BM = GEMM_BM>
static __device__ __forceinline__ void
epilogue_tma(const gemm_args &a, const float *d, int tm, int tn, out_stage *st,
             const CUtensorMap *map_h0, const CUtensorMap *map_h1, const CUtensorMap *map_y) {
    if (EPI == EPI_PLAIN || EPI == EPI_DGRAD) {
        const int q = threadIdx.x % 4, row0 = tm * BM + st->c * 64;
        const T *bias = (const T *)a.bias;
        uint32_t v[16];
#pragma unroll
        for (int j = 0; j < BN / 64; j++) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int64_t col = (int64_t)tn * BN + 64 * j + 8 * i + 2 * q;
                float b0 = 0.0f, b1 = 0.0f;
                if (bias && col < a.N) b0 = to_f32(bias[col]), b1 = to_f32(bias[col + 1]);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float v0 = d[4 * (8 * j + i) + 2 * e], v1 = d[4 * (8 * j + i) + 2 * e + 1];
                    if (bias) v0 = __fadd_rn(v0, b0), v1 = __fadd_rn(v1, b1);
                    v[2 * i + e] = pack2((T *)0, v0, v1);
                }
            }
            put_chunk(st, map_h0, v, tn * BN + 64 * j, row0);
        }
        return;
    }
    /* EPI_GLU_SPLIT: h (+ bias) rounded and packed, then every step of the deferred epilogue at
     * once (h gate, h up and y of each 64-column chunk): its bits */
    glu_pending pd;
    glu_defer_pack<T, BM>(a, d, tm, tn, st->c, &pd);
    glu_defer_rest<T, MM, BM>(a, &pd, 0, st, map_h0, map_h1, map_y);
}

/* ---- the fc2 dgrad + dGLU epilogue ----------------------------------------------------------
 * Chunk by chunk (64 columns of dY: n8 blocks 8j .. 8j + 7): the chunk's h words (gate and up, 16
 * pairs each) are loaded first, as one batch of independent loads that hit L2 (the main loop
 * prefetched the tile's h rows there), then the family's backward and forward on the pairs, then
 * d_gate, d_up and y go out through the TMA-store staging (TS) or from registers. Loading h pair
 * by pair between the stores (EPI_DGLU_OLD) made a chain of dependent DRAM round trips per tile
 * while the tensor cores waited. The arithmetic is the same, operation for operation. */

/* the words of h's gate (hg) and up (hu) of this thread's pairs in n8 blocks i0 .. i0 + NB - 1 of
 * the chunk at col0 (rows r0 + {0, 8}; block i0 + k, row 8 e at 2 k + e); 0 outside [M, F] (those
 * results are clipped or skipped) */
template <typename T, int NB>
static __device__ __forceinline__ void dglu_load(const gemm_args &a, int64_t r0, int64_t col0,
                                                 int i0, uint32_t *hg, uint32_t *hu) {
    const int q = threadIdx.x % 4;
    const T *h = (const T *)a.h;
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int64_t row = r0 + 8 * e;
        const T *hr = h + (row < a.M ? row : 0) * a.h_row_stride;
#pragma unroll
        for (int k = 0; k < NB; k++) {
            /* F % 8 == 0: the pair is in or out */
            const int64_t col = col0 + 8 * (i0 + k) + 2 * q;
            uint32_t g = 0, u = 0;
            if (row < a.M && col < a.N) {
                g = __ldg((const unsigned int *)(hr + col));
                u = __ldg((const unsigned int *)(hr + a.N + col));
            }
            hg[2 * k + e] = g, hu[2 * k + e] = u;
        }
    }
}

/* the h rows of this consumer's 64 x 256 block (gate and up, 512 bytes each) into L2: thread lt
 * takes row lt / 2, gate (lt even) or up */
template <typename T>
static __device__ __forceinline__ void dglu_prefetch(const gemm_args &a, int tm, int tn, int c) {
    const int lt = threadIdx.x % 128;
    const int64_t row = (int64_t)tm * GEMM_BM + c * 64 + lt / 2, col0 = (int64_t)tn * GEMM_BN;
    if (row >= a.M) return;
    const T *p = (const T *)a.h + row * a.h_row_stride + (lt % 2) * a.N;
    const int64_t last = min(col0 + GEMM_BN, a.N) - 1;
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (col0 + 64 * k <= last) prefetch_l2(p + col0 + 64 * k);
    prefetch_l2(p + last); /* the line of the block's end */
}

/* chunk j: the backward of each pair on dY rounded to T (a separate GEMM's output); d_gate and
 * d_up packed in place of the gate and up words, y (when wanted) into vy; DW: the pairs' dweights
 * terms added to dwp[e] (row e) in order */
template <typename T, int DW, int MM>
static __device__ __forceinline__ void dglu_chunk(const gemm_args &a, const float *d, int j,
                                                  const float *w, uint32_t *hg, uint32_t *hu,
                                                  uint32_t *vy, int want_y, float *dwp) {
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float g0, g1, u0, u1;
            unpack2((T *)0, hg[2 * i + e], &g0, &g1);
            unpack2((T *)0, hu[2 * i + e], &u0, &u1);
            const float dy0 = round_to<T>(d[4 * (8 * j + i) + 2 * e]),
                        dy1 = round_to<T>(d[4 * (8 * j + i) + 2 * e + 1]);
            const glu_grads r0g = glu_backward<MM, 0, 1>(a.m, g0, u0, 0.0f, 0.0f, w[e], dy0);
            const glu_grads r1g = glu_backward<MM, 0, 1>(a.m, g1, u1, 0.0f, 0.0f, w[e], dy1);
            hg[2 * i + e] = pack2((T *)0, r0g.dg, r1g.dg);
            hu[2 * i + e] = pack2((T *)0, r0g.du, r1g.du);
            if (DW) dwp[e] = __fadd_rn(__fadd_rn(dwp[e], r0g.dw), r1g.dw);
            if (want_y) vy[2 * i + e] = pack2((T *)0, r0g.y, r1g.y);
        }
}

/* One consumer warpgroup's 64 x 256 block of dY to d_gate, d_up (dh's halves: map_h0, map_h1) and
 * y (map_y). The first chunk's loads are not issued under the last k-block's wgmma: the 32 more
 * live registers beside the 128 accumulators make ptxas serialize the wgmma (warning C7515). */
template <typename T, int TS, int DW, int MM>
static __device__ __forceinline__ void
epilogue_dglu(const gemm_args &a, const float *d, int tm, int tn, int c, out_stage *st,
              const CUtensorMap *map_h0, const CUtensorMap *map_h1, const CUtensorMap *map_y,
              float *dw_sum) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, q = lane % 4;
    const int row0 = tm * GEMM_BM + c * 64;
    const int64_t r0 = (int64_t)row0 + warp * 16 + lane / 4;
    T *y = (T *)a.y, *dh = (T *)a.dh;
    float w[2] = {1.0f, 1.0f}, dwp[2] = {0.0f, 0.0f};
#pragma unroll
    for (int e = 0; e < 2; e++)
        if (a.weights && r0 + 8 * e < a.M)
            w[e] = load_token_weight(a.weights, a.weights_dtype, (r0 + 8 * e) * a.weights_stride);
#pragma unroll
    for (int j = 0; j < GEMM_BN / 64; j++) {
        const int col0 = tn * GEMM_BN + 64 * j;
        if (col0 >= a.N) break; /* the same for the whole warpgroup */
        uint32_t hg[16], hu[16], vy[16];
        dglu_load<T, 8>(a, r0, col0, 0, hg, hu);
        dglu_chunk<T, DW, MM>(a, d, j, w, hg, hu, vy, y != NULL, dwp);
        if (TS) {
            put_chunk(st, map_h0, hg, col0, row0);
            put_chunk(st, map_h1, hu, col0, row0);
            if (y) put_chunk(st, map_y, vy, col0, row0);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int64_t col = (int64_t)col0 + 8 * i + 2 * q;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int64_t row = r0 + 8 * e;
                    if (row < a.M && col < a.N) {
                        T *dr = dh + row * a.dh_row_stride;
                        *(uint32_t *)(dr + col) = hg[2 * i + e];
                        *(uint32_t *)(dr + a.N + col) = hu[2 * i + e];
                        if (y) *(uint32_t *)(y + row * a.y_row_stride + col) = vy[2 * i + e];
                    }
                }
            }
        }
    }
    if (DW) {
        /* the row's four lanes (q) in a fixed tree (each lane gets the same sum), then the row's
         * running sum over the column tiles in order: kept by lane q = 0 in shared memory (the same
         * thread owns the row in every tile), stored after the last column tile */
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float v = dwp[e];
            v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
            v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
            const int lr = c * 64 + warp * 16 + lane / 4 + 8 * e;
            if (q == 0) {
                const float sum = tn == 0 ? v : __fadd_rn(dw_sum[lr], v);
                dw_sum[lr] = sum;
                const int64_t row = r0 + 8 * e;
                if (tn == a.tiles_n - 1 && row < a.M) {
                    const int64_t o = row * a.dweights_stride;
                    if (a.weights_dtype == FASTGLU_DTYPE_FP32)
                        ((float *)a.dweights)[o] = sum;
                    else if (a.weights_dtype == FASTGLU_DTYPE_FP16)
                        from_f32((__half *)a.dweights + o, sum);
                    else
                        from_f32((__nv_bfloat16 *)a.dweights + o, sum);
                }
            }
        }
    }
}

/* ---- the deferred fc2 dgrad + dGLU epilogue (GEMM_DGLU_DEFER) ------------------------------
 * The TMA-store EPI_DGLU's epilogue (h's loads, the backward and y per pair, three 64 x 64 stores a
 * chunk) is the heaviest of the kernel's, and in the cooperative schedule the tensor cores wait for
 * it. As the fc1 + GLU epilogue (glu_defer_*), a tile's main loop ends with dY rounded to the dtype
 * and packed, 64 words a thread (dglu_defer_pack), and the next tile's main loop runs a step (a
 * half chunk, GEMM_DGLU_STEP_BLOCKS) every GEMM_DEFER_EVERY(num_k_blocks, GEMM_DGLU_NSTEPS + 1)
 * k-blocks from its first (GEMM_DEFER_SPREAD: h's loads and the stores spread over the loop), after
 * the previous k-block's stage went back to the producer (dglu_defer_at):
 * step S = 2 j + hh takes n8 blocks 4 hh .. 4 hh + 3 of chunk j (32 columns, dglu_defer_step),
 * reads their h words from shared memory, computes d_gate, d_up and y and writes d_gate and d_up
 * over the h words they came from and y into its buffer; the chunk's last step stores the three
 * (one bulk group). h comes by TMA, a chunk's gate and up into one of two buffer pairs (chunk
 * parity), so that no thread waits on a global load between the tile's wgmma: chunks 0 and 1
 * during the tile's own main loop (dglu_h_first, at the event after the steps: the previous
 * tile's steps are done), chunk j + 1 at the first step of chunk j (j = 1, 2), once the chunk
 * before's stores have read its pair and y's buffer (bulk_wait_read<0>: they were issued a step
 * earlier). A tile whose main loop ends before the steps, and the block's last tile, finish them
 * after the main loop; without the deferral the steps run right after the pack: the same
 * operations, the same bits. */

/* chunk j of tile (tm, tn): this warpgroup's 64 rows of h's gate and up columns of the chunk by
 * TMA into buffer pair j % 2, completing barrier j % 2; one thread, once the pair's last stores
 * have read it. map_hin: h as one [M, 2F] tensor (a gate chunk's columns past F read up's, whose
 * results are clipped; rows past M read zeros) */
static __device__ __forceinline__ void dglu_h_load(const gemm_args &a, const out_stage *st,
                                                   const CUtensorMap *map_hin, int tm, int tn,
                                                   int j) {
    const int col0 = tn * GEMM_BN + 64 * j, row0 = tm * GEMM_BM + st->c * 64;
    if (col0 >= a.N) return; /* no step takes the chunk */
    const uint32_t bar = st->hbar + 8 * (j & 1), buf = st->buf + (j & 1) * 2 * GEMM_OUT_BUF_BYTES;
    mbar_expect_tx(bar, 2 * GEMM_OUT_BUF_BYTES);
    tma_load_2d(buf, map_hin, bar, col0, row0);
    tma_load_2d(buf + GEMM_OUT_BUF_BYTES, map_hin, bar, (int)a.N + col0, row0);
}

/* the tile's chunks 0 and 1 of h, once the previous tile's stores have read both pairs (its steps
 * are done: every thread passed the barrier before its last store) */
static __device__ __forceinline__ void dglu_h_first(const gemm_args &a, const out_stage *st,
                                                    const CUtensorMap *map_hin, int tm, int tn) {
    if (threadIdx.x % 128 == 0) {
        bulk_wait_read<0>();
        dglu_h_load(a, st, map_hin, tm, tn, 0);
        dglu_h_load(a, st, map_hin, tm, tn, 1);
    }
}

typedef struct dglu_pending {
    uint32_t dy[64]; /* chunk j, n8 block i, row 8 e: word 16 j + 2 i + e */
    float w[2];      /* the token weights of the thread's two rows */
    int tm, tn;      /* the tile's coordinates; tm < 0: nothing pending */
} dglu_pending;

template <typename T>
static __device__ __forceinline__ void dglu_defer_pack(const gemm_args &a, const float *d, int tm,
                                                       int tn, int c, dglu_pending *pd) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int64_t r0 = (int64_t)tm * GEMM_BM + c * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int e = 0; e < 2; e++)
        pd->w[e] =
            a.weights && r0 + 8 * e < a.M
                ? load_token_weight(a.weights, a.weights_dtype, (r0 + 8 * e) * a.weights_stride)
                : 1.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) /* k = 8 j + i */
#pragma unroll
        for (int e = 0; e < 2; e++)
            pd->dy[2 * k + e] = pack2((T *)0, d[4 * k + 2 * e], d[4 * k + 2 * e + 1]);
    pd->tm = tm, pd->tn = tn;
}

/* The 2 B packed dY words of step S (B = GEMM_DGLU_STEP_BLOCKS, C = GEMM_DGLU_CHUNK_STEPS): n8
 * blocks B (S % C) .. + B - 1 of chunk S / C, rows 8 e, words 16 (S / C) + 2 i + e = 2 B S + k
 * (k < 2 B), selected with constant indices (the pending words stay in registers) */
static __device__ __forceinline__ void dglu_step_words(const dglu_pending *pd, int S, uint32_t *w) {
    static_assert(GEMM_DGLU_NSTEPS == 8, "the cases below are steps 0 .. 6, the default step 7");
    constexpr int NW = 2 * GEMM_DGLU_STEP_BLOCKS;
#define DGLU_WORDS(C)                                                                              \
    for (int k = 0; k < NW; k++) w[k] = pd->dy[NW * (C) + k];
#define DGLU_CASE(C)                                                                               \
    case C: DGLU_WORDS(C) break;
    /* clang-format off */
    switch (S) { /* the last step is the default */
        DGLU_CASE(0) DGLU_CASE(1) DGLU_CASE(2) DGLU_CASE(3) DGLU_CASE(4) DGLU_CASE(5) DGLU_CASE(6)
    default: DGLU_WORDS(GEMM_DGLU_NSTEPS - 1)
    }
    /* clang-format on */
#undef DGLU_CASE
#undef DGLU_WORDS
}

/* Step S (0 .. GEMM_DGLU_NSTEPS - 1, warp-uniform) of the pending tile with its dY words dyw: chunk
 * j = S / C, n8 blocks i0 = B (S % C) .. i0 + B - 1 (B = GEMM_DGLU_STEP_BLOCKS, C =
 * GEMM_DGLU_CHUNK_STEPS); a chunk's first step waits for its h, its last stores it. One body for
 * every step (S at run time): the code of the deferred epilogue is a fraction of the kernel's (each
 * step's copy would be ~1000 instructions more). */
template <typename T, int MM>
static __device__ __forceinline__ void
dglu_defer_step(const gemm_args &a, const dglu_pending *pd, int S, const uint32_t *dyw,
                out_stage *st, const CUtensorMap *map_h0, const CUtensorMap *map_h1,
                const CUtensorMap *map_y, const CUtensorMap *map_hin) {
    constexpr unsigned B = GEMM_DGLU_STEP_BLOCKS, C = GEMM_DGLU_CHUNK_STEPS;
    /* S >= 0: unsigned, so that / and % are shifts and masks */
    const int j = (unsigned)S / C, sc = (unsigned)S % C, i0 = B * sc;
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, lt = threadIdx.x % 128,
              q = lane % 4;
    const int row0 = pd->tm * GEMM_BM + st->c * 64, col0 = pd->tn * GEMM_BN + 64 * j;
    if (col0 >= a.N) return; /* the same for the whole warpgroup */
    /* the chunk's pair: h's gate and up words, then d_gate and d_up in their places */
    const uint32_t bg = st->buf + (j & 1) * 2 * GEMM_OUT_BUF_BYTES, bu = bg + GEMM_OUT_BUF_BYTES,
                   by = st->buf + 4 * GEMM_OUT_BUF_BYTES;
    if (sc == 0) {
        /* the chunk before's stores have read the other pair and y's buffer: chunk j + 1's h
         * goes into that pair (chunks 0 and 1 came with dglu_h_first) */
        if (lt == 0) {
            bulk_wait_read<0>();
            if (j == 1 || j == 2) dglu_h_load(a, st, map_hin, pd->tm, pd->tn, j + 1);
        }
        named_bar_sync(1 + st->c, 128);
        mbar_wait(st->hbar + 8 * (j & 1), (st->hph >> (j & 1)) & 1u);
        st->hph ^= 1u << (j & 1);
    }
#pragma unroll
    for (int k = 0; k < (int)B; k++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            /* the pair's place in the 128-byte swizzled chunk (n8 block i0 + k, row 8 e): TMA's
             * for h, put_chunk's for the stores */
            const uint32_t o =
                (warp * 16 + lane / 4 + 8 * e) * 128 + (((i0 + k) ^ (lane / 4)) << 4) + 4 * q;
            float g0, g1, u0, u1, dy0, dy1;
            unpack2((T *)0, ld_shared_u32(bg + o), &g0, &g1);
            unpack2((T *)0, ld_shared_u32(bu + o), &u0, &u1);
            unpack2((T *)0, dyw[2 * k + e], &dy0, &dy1);
            const glu_grads r0g = glu_backward<MM, 0, 1>(a.m, g0, u0, 0.0f, 0.0f, pd->w[e], dy0);
            const glu_grads r1g = glu_backward<MM, 0, 1>(a.m, g1, u1, 0.0f, 0.0f, pd->w[e], dy1);
            st_shared_u32(bg + o, pack2((T *)0, r0g.dg, r1g.dg));
            st_shared_u32(bu + o, pack2((T *)0, r0g.du, r1g.du));
            if (a.y) st_shared_u32(by + o, pack2((T *)0, r0g.y, r1g.y));
        }
    if (sc == (int)C - 1) {
        fence_proxy_async();
        named_bar_sync(1 + st->c, 128);
        if (lt == 0) {
            tma_store_2d(map_h0, bg, col0, row0);
            tma_store_2d(map_h1, bu, col0, row0);
            if (a.y) tma_store_2d(map_y, by, col0, row0);
            bulk_commit();
        }
    }
}

/* the pending tile's steps from `from` to the last (from is warp-uniform) */
template <typename T, int MM>
static __device__ __forceinline__ void
dglu_defer_rest(const gemm_args &a, dglu_pending *pd, int from, out_stage *st,
                const CUtensorMap *map_h0, const CUtensorMap *map_h1, const CUtensorMap *map_y,
                const CUtensorMap *map_hin) {
#pragma unroll 1
    for (int S = from; S < GEMM_DGLU_NSTEPS; S++) {
        uint32_t w[2 * GEMM_DGLU_STEP_BLOCKS];
        dglu_step_words(pd, S, w);
        dglu_defer_step<T, MM>(a, pd, S, w, st, map_h0, map_h1, map_y, map_hin);
    }
    pd->tm = -1;
}

/* step S of the pending tile, if S < GEMM_DGLU_NSTEPS (S is warp-uniform) */
template <typename T, int MM>
static __device__ __forceinline__ void
dglu_defer_at(const gemm_args &a, dglu_pending *pd, int S, out_stage *st, const CUtensorMap *map_h0,
              const CUtensorMap *map_h1, const CUtensorMap *map_y, const CUtensorMap *map_hin) {
    if (S >= GEMM_DGLU_NSTEPS) return;
    uint32_t w[2 * GEMM_DGLU_STEP_BLOCKS];
    dglu_step_words(pd, S, w);
    dglu_defer_step<T, MM>(a, pd, S, w, st, map_h0, map_h1, map_y, map_hin);
    if (S == GEMM_DGLU_NSTEPS - 1) pd->tm = -1;
}

/* the deferred step due at this k-block: step *step of the pending tile of the fc1 + GLU (DEFER)
 * or the dGLU (DEFER_DGLU), if any; then the next step, due `every` k-blocks later */
template <typename T, int MM, int NC, bool DEFER, bool DEFER_DGLU>
static __device__ __forceinline__ void
defer_step(const gemm_args &a, glu_pending *pd, dglu_pending *pq, int *step, int *step_kb,
           int every, out_stage *st, const CUtensorMap *map_h0, const CUtensorMap *map_h1,
           const CUtensorMap *map_y, const CUtensorMap *map_hin) {
    if constexpr (DEFER)
        if (pd->tm >= 0) glu_defer_at<T, MM, 64 * NC>(a, pd, *step, st, map_h0, map_h1, map_y);
    if constexpr (DEFER_DGLU)
        if (pq->tm >= 0) dglu_defer_at<T, MM>(a, pq, *step, st, map_h0, map_h1, map_y, map_hin);
    ++*step, *step_kb += every;
}

/* TB: B's transpose immediate, 0 K-major (w [N, K]), 1 MN-major (w2 [K, N]: the dgrad) */
template <int TB>
static __device__ __forceinline__ void mma256(float *d, uint64_t a, uint64_t b, __nv_bfloat16 *) {
    wgmma_m64n256k16_bf16<TB>(d, a, b);
}
template <int TB>
static __device__ __forceinline__ void mma256(float *d, uint64_t a, uint64_t b, __half *) {
    wgmma_m64n256k16_f16<TB>(d, a, b);
}
template <int TB>
static __device__ __forceinline__ void mma192(float *d, uint64_t a, uint64_t b, __nv_bfloat16 *) {
    wgmma_m64n192k16_bf16<TB>(d, a, b);
}
template <int TB>
static __device__ __forceinline__ void mma192(float *d, uint64_t a, uint64_t b, __half *) {
    wgmma_m64n192k16_f16<TB>(d, a, b);
}

/* one k16 step of a consumer's 64 x BN block */
template <typename T, int BN, int TB>
static __device__ __forceinline__ void wgmma_tile(float *d, uint64_t da, uint64_t db) {
    if constexpr (BN == 256)
        mma256<TB>(d, da, db, (T *)0);
    else
        mma192<TB>(d, da, db, (T *)0);
}

/* a stage read by this warp goes back: to this block's producer and, in a cluster, to the peer's */
template <int CL> static __device__ __forceinline__ void release(uint32_t bar, int rank) {
    mbar_arrive(bar);
    if (CL > 1) mbar_arrive_peer(bar, (uint32_t)rank ^ 1);
}

#endif /* !__CUDA_ARCH__ || GEMM_SM90_DEVICE */

/* ---- the kernel ---------------------------------------------------------------------------- */

/* TS: outputs through the TMA-store epilogue (plain and SPLIT, 16-byte aligned outputs), else
 * stored from registers. CL: blocks per cluster (1, or 2 sharing B by multicast; the launch's
 * cluster dimension must match). */
template <typename T, int EPI, int TS, int BN, int MM, int CL = GEMM_CLUSTER, int NC = 2>
__global__ void __launch_bounds__(128 * (NC + 1), 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_b0,
                     const __grid_constant__ CUtensorMap map_b1,
                     const __grid_constant__ CUtensorMap map_h0,
                     const __grid_constant__ CUtensorMap map_h1,
                     const __grid_constant__ CUtensorMap map_y, const gemm_args a) {
#ifdef GEMM_SM90_DEVICE
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    /* the TMA-store dGLU's epilogue in steps (dglu_defer_step), deferred or not; its staging
     * buffers (OB a consumer warpgroup) */
    constexpr bool dglu_steps = GEMM_DGLU_STEPS(EPI, TS);
    constexpr int OB = GEMM_OUT_BUFS_OF(EPI, TS);
    const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const uint32_t outbuf = ring + GEMM_STAGES * GEMM_STAGE_BYTES;
    const uint32_t full = outbuf + NC * OB * GEMM_OUT_BUF_BYTES, empty = full + 8 * GEMM_STAGES;
    constexpr uint32_t a_bytes = NC * 64 * GEMM_BK * 2; /* a stage's A: BM = 64 NC rows */
    const int wg = threadIdx.x / 128;
    /* units (CL tiles, one per block of a cluster): this block takes tile rank (block_tile) */
    const int rank = CL == 1 ? 0 : (int)cluster_ctarank();
    float *dw_sum = (float *)(smem_raw + (empty + 8 * GEMM_STAGES - smem_u32(smem_raw)));
    /* the dGLU's steps: the h loads' barriers, two a consumer warpgroup (after dw_sum's place) */
    const uint32_t hbar = empty + 8 * GEMM_STAGES + 64 * NC * 4;
    if (threadIdx.x == 0) {
        for (int s = 0; s < GEMM_STAGES; s++) {
            mbar_init(full + 8 * s, 1); /* the producer's expect_tx; TMA's bytes complete it */
            /* one arrival per consumer warp of every block of the cluster, after its wgmma wait
             * (a stage is refilled in all of them at once) */
            mbar_init(empty + 8 * s, 4 * NC * CL);
        }
        if (dglu_steps) /* the loading thread's expect_tx; TMA's bytes complete it */
            for (int i = 0; i < 2 * NC; i++) mbar_init(hbar + 8 * i, 1);
        fence_mbarrier_init();
    }
    if (CL == 1)
        __syncthreads();
    else
        cluster_sync();
    if (wg == 0) { /* producer */
        /* its registers go to the consumers: 168 -> 40 a thread (NC 2), 128 -> 40 (NC 3) */
        setmaxnreg_dec40();
        if (threadIdx.x == 0) {
            int s = 0;
            uint32_t ph = 0;
            int tm, tn;
            for (int u = 0; block_tile<EPI, CL>(a, u, rank, &tm, &tn); u++) {
                const int m0 = tm * (64 * NC);
                const int b0 = EPI == EPI_GLU_SPLIT ? tn * (BN / 2) : tn * BN;
                const int b1 = EPI == EPI_GLU_SPLIT ? b0 : b0 + BN / 2;
                const CUtensorMap *mb1 = EPI == EPI_GLU_SPLIT ? &map_b1 : &map_b0;
                for (int kb = 0; kb < a.num_k_blocks; kb++) {
                    mbar_wait(empty + 8 * s, ph ^ 1);
                    mbar_expect_tx(full + 8 * s, a_bytes + BN * GEMM_BK * 2);
                    const uint32_t sa = ring + s * GEMM_STAGE_BYTES, sb = sa + a_bytes;
                    tma_load_2d(sa, &map_a, full + 8 * s, kb * GEMM_BK, m0);
                    if (EPI_MN_MAJOR(EPI)) { /* w2 [K, N]: BN / 64 boxes of 64 k rows x 64 n */
#pragma unroll
                        for (int j = 0; j < BN / 64; j++)
                            tma_load_2d(sb + j * (64 * GEMM_BK * 2), &map_b0, full + 8 * s,
                                        tn * BN + 64 * j, kb * GEMM_BK);
                    } else if (CL == 1) {
                        tma_load_2d(sb, &map_b0, full + 8 * s, kb * GEMM_BK, b0);
                        tma_load_2d(sb + BN / 2 * GEMM_BK * 2, mb1, full + 8 * s, kb * GEMM_BK, b1);
                    } else if (rank == 0) { /* the first half of B for both blocks */
                        tma_load_2d_mc(sb, &map_b0, full + 8 * s, kb * GEMM_BK, b0, 3);
                    } else {
                        tma_load_2d_mc(sb + BN / 2 * GEMM_BK * 2, mb1, full + 8 * s, kb * GEMM_BK,
                                       b1, 3);
                    }
                    if (++s == GEMM_STAGES) s = 0, ph ^= 1;
                }
            }
        }
    } else { /* consumers: warpgroup c = wg - 1 takes rows [64c, 64c + 64) of the tile */
        /* 232 = 168 + 128 x 128 / 256; 152 <= 128 + 88 x 128 / 384 */
        setmaxnreg_inc<NC == 2 ? 232 : 152>();
        /* warp-uniform for the compiler (a shuffle of lane 0), so that the A operand's descriptor
         * is computed in uniform registers rather than converted from vector ones each k-step */
        const int c = __shfl_sync(0xffffffffu, wg - 1, 0);
        out_stage st;
        st.buf = outbuf + c * OB * GEMM_OUT_BUF_BYTES, st.c = c, st.n = 0;
        st.hbar = hbar + 16 * c, st.hph = 0;
        int s = 0;
        uint32_t ph = 0;
        int tm, tn;
        /* the deferred SPLIT epilogue (GEMM_GLU_DEFER): the previous tile's packed h */
        constexpr bool defer =
            GEMM_GLU_DEFER && GEMM_WAIT_DEPTH == 1 && EPI == EPI_GLU_SPLIT && TS && NC == 2;
        glu_pending pd;
        pd.tm = -1;
        /* the deferred dGLU epilogue (GEMM_DGLU_DEFER): the previous tile's packed dY */
        constexpr bool defer_dglu = dglu_steps && GEMM_DGLU_DEFER && GEMM_WAIT_DEPTH == 1;
        dglu_pending pq;
        pq.tm = -1;
        const int every = GEMM_DEFER_EVERY(a.num_k_blocks, defer_dglu ? GEMM_DGLU_NSTEPS + 1 : 8);
        for (int u = 0; block_tile<EPI, CL>(a, u, rank, &tm, &tn); u++) {
            float d[BN / 2];
#pragma unroll
            for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
            int prev = -1; /* the stage whose k-block is still in flight (GEMM_WAIT_DEPTH 1) */
            const int pf_kb =
                (EPI == EPI_DGLU || EPI == EPI_DGLU_DW) && (!dglu_steps || GEMM_DGLU_STEPS_PREFETCH)
                    ? max(a.num_k_blocks - GEMM_DGLU_PREFETCH_KB, 0)
                    : -1;
            /* the previous tile's deferred steps: step `step` at k-block step_kb, then every
             * `every` k-blocks (the rest after the main loop when it has fewer) */
            int step = 0, step_kb = 0;
            /* the dGLU's steps: the tile's first two chunks of h at this k-block, after the
             * previous tile's steps, else after the main loop */
            const int h_kb = defer_dglu && GEMM_DEFER_SPREAD ? GEMM_DGLU_NSTEPS * every
                                                             : max(pf_kb, GEMM_DGLU_NSTEPS);
            for (int kb = 0; kb < a.num_k_blocks; kb++) {
                mbar_wait(full + 8 * s, ph);
                const uint32_t sa = ring + s * GEMM_STAGE_BYTES + c * (64 * GEMM_BK * 2);
                const uint32_t sb = ring + s * GEMM_STAGE_BYTES + a_bytes;
                wgmma_fence();
                if (EPI_MN_MAJOR(EPI)) {
#pragma unroll
                    for (int k = 0; k < GEMM_BK / 16; k++)
                        wgmma_tile<T, BN, 1>(d, smem_desc(sa + 32 * k),
                                             smem_desc_mn(sb + 16 * 128 * k));
                } else {
#pragma unroll
                    for (int k = 0; k < GEMM_BK / 16; k++)
                        wgmma_tile<T, BN, 0>(d, smem_desc(sa + 32 * k), smem_desc(sb + 32 * k));
                }
                wgmma_commit();
                if (kb == pf_kb) dglu_prefetch<T>(a, tm, tn, c);
#if GEMM_WAIT_DEPTH == 1
                /* the previous k-block's group is done: its stage goes back to the producer */
                wgmma_wait<1>();
                if (prev >= 0 && threadIdx.x % 32 == 0) release<CL>(empty + 8 * prev, rank);
                prev = s;
                /* a step of the previous tile's epilogue while this k-block's wgmma runs */
                if constexpr (defer || defer_dglu)
                    if (kb == step_kb)
                        defer_step<T, MM, NC, defer, defer_dglu>(a, &pd, &pq, &step, &step_kb,
                                                                 every, &st, &map_h0, &map_h1,
                                                                 &map_y, &map_b1);
#else
                wgmma_wait<0>();
                if (threadIdx.x % 32 == 0) release<CL>(empty + 8 * s, rank);
#endif
                if constexpr (dglu_steps)
                    if (kb == h_kb) dglu_h_first(a, &st, &map_b1, tm, tn);
                if (++s == GEMM_STAGES) s = 0, ph ^= 1;
            }
#if GEMM_WAIT_DEPTH == 1
            wgmma_wait<0>();
            if (prev >= 0 && threadIdx.x % 32 == 0) release<CL>(empty + 8 * prev, rank);
#endif
            if constexpr (defer) {
                /* a main loop shorter than the steps leaves steps of the previous tile */
                if (pd.tm >= 0)
                    glu_defer_rest<T, MM, 64 * NC>(a, &pd, step, &st, &map_h0, &map_h1, &map_y);
                glu_defer_pack<T, 64 * NC>(a, d, tm, tn, c, &pd);
            } else if constexpr (dglu_steps) {
                /* a main loop shorter than the steps leaves steps of the previous tile */
                if (defer_dglu && pq.tm >= 0)
                    dglu_defer_rest<T, MM>(a, &pq, step, &st, &map_h0, &map_h1, &map_y, &map_b1);
                if (h_kb >= a.num_k_blocks) dglu_h_first(a, &st, &map_b1, tm, tn);
                dglu_defer_pack<T>(a, d, tm, tn, c, &pq);
                if (!defer_dglu)
                    dglu_defer_rest<T, MM>(a, &pq, 0, &st, &map_h0, &map_h1, &map_y, &map_b1);
            } else if constexpr (EPI == EPI_DGLU || EPI == EPI_DGLU_DW)
                epilogue_dglu<T, TS, EPI == EPI_DGLU_DW, MM>(a, d, tm, tn, c, &st, &map_h0, &map_h1,
                                                             &map_y, dw_sum);
            else if constexpr (TS)
                epilogue_tma<T, EPI, BN, MM, 64 * NC>(a, d, tm, tn, &st, &map_h0, &map_h1, &map_y);
            else
                epilogue<T, EPI, BN>(a, d, tm, tn, c);
        }
        if constexpr (defer) /* the block's last tile */
            if (pd.tm >= 0)
                glu_defer_rest<T, MM, 64 * NC>(a, &pd, 0, &st, &map_h0, &map_h1, &map_y);
        if constexpr (defer_dglu)
            if (pq.tm >= 0)
                dglu_defer_rest<T, MM>(a, &pq, 0, &st, &map_h0, &map_h1, &map_y, &map_b1);
        if (TS && threadIdx.x % 128 == 0) bulk_wait_all(); /* the stores have left shared memory */
    }
    /* no block leaves while its peer may still write its stages or arrive on its barriers */
    if (CL > 1) cluster_sync();
#endif
}

/* ---- host ---------------------------------------------------------------------------------- */

/* cuTensorMapEncodeTiled through the runtime's driver entry point: no link-time libcuda. */
static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn; /* the same value from any thread */
    if (!fn) {
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                             &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
    }
    return fn;
}

/* [rows, K] row-major at base, boxes of box_rows rows x 64 k, 128-byte swizzle, zeros out of bounds. */
static CUresult make_map(CUtensorMap *map, const void *base, int64_t rows, int64_t K,
                         int64_t row_stride, fastglu_dtype dtype, int box_rows) {
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    /* one row: its stride is never used; any legal value */
    const cuuint64_t strides[1] = {
        (cuuint64_t)(rows > 1 ? row_stride * 2 : (K * 2 + 15) / 16 * 16)};
    const cuuint32_t box[2] = {GEMM_BK, (cuuint32_t)box_rows}, elem[2] = {1, 1};
    return encode_tiled()(map,
                          dtype == FASTGLU_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                          2, (void *)base, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* w2 [K rows, N] row-major, the dgrad's MN-major B: boxes of 64 k rows x 64 n (128 bytes),
 * 128-byte swizzle, zeros out of bounds (smem_desc_mn's layout). */
static CUresult make_map_mn(CUtensorMap *map, const void *base, int64_t K, int64_t N,
                            int64_t row_stride, fastglu_dtype dtype) {
    const cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)K};
    const cuuint64_t strides[1] = {(cuuint64_t)(K > 1 ? row_stride * 2 : (N * 2 + 15) / 16 * 16)};
    const cuuint32_t box[2] = {64, GEMM_BK}, elem[2] = {1, 1};
    return encode_tiled()(map,
                          dtype == FASTGLU_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                          2, (void *)base, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* Development hooks (bench/gemm/sm90_dev.py, built with -DFASTGLU_GEMM_DEV_HOOKS; in no header):
 * process-wide overrides of the launch's choices, to time the alternatives side by side. Without
 * the macro they are constants and the library exports no such symbol. */
#ifdef FASTGLU_GEMM_DEV_HOOKS
static int group_m_setting = GEMM_GROUP_M; /* the tile order's group, 0 by tile */
static int tma_store_off;                  /* 1: every output stored from registers */
static int mm_force = -1;                  /* a math mode for every GLU problem (MM_ANY = 0) */
static int bn_force;                       /* 192 or 256: the plain GEMM's tile width */
static int bm_force;                       /* 128 or 192: the plain GEMM's tile height */
/* the dgrad's epilogue: 0 EPI_DGLU, 1 EPI_DGLU_OLD (h loaded pair by pair, stored from
 * registers), 2 EPI_DGRAD (no dGLU: dY rounded to the dtype into dh's first F columns) */
static int dglu_variant;
extern "C" void fastglu_gemm_sm90_set_group_m(int g) { group_m_setting = g > 0 ? g : GEMM_GROUP_M; }
extern "C" void fastglu_gemm_sm90_set_tma_store(int on) { tma_store_off = !on; }
extern "C" void fastglu_gemm_sm90_set_math_mode(int mm) { mm_force = mm; }
extern "C" void fastglu_gemm_sm90_set_bn(int bn) { bn_force = bn == 192 || bn == 256 ? bn : 0; }
extern "C" void fastglu_gemm_sm90_set_bm(int bm) { bm_force = bm == 128 || bm == 192 ? bm : 0; }
extern "C" void fastglu_gemm_sm90_set_dglu_variant(int v) {
    dglu_variant = v >= 0 && v <= 2 ? v : 0;
}
/* blocks per cluster of the plain GEMM and the TMA-store SPLIT fc1 + GLU: 0 the build's
 * (GEMM_CLUSTER), 1, or 2 (B multicast to the pair) */
static int cluster_force;
extern "C" void fastglu_gemm_sm90_set_cluster(int c) { cluster_force = c == 1 || c == 2 ? c : 0; }
#else
#define group_m_setting GEMM_GROUP_M
#define tma_store_off 0
#define mm_force (-1)
#define bn_force 0
#define bm_force 0
#define dglu_variant 0
#define cluster_force 0
#endif

typedef void (*gemm_kernel_fn)(const CUtensorMap, const CUtensorMap, const CUtensorMap,
                               const CUtensorMap, const CUtensorMap, const CUtensorMap,
                               const gemm_args);

static int epi_of(const fastglu_gemm_problem *p) {
    if (p->dglu && p->dweights) return EPI_DGLU_DW;
    if (p->dglu) return dglu_variant == 1 ? EPI_DGLU_OLD : dglu_variant == 2 ? EPI_DGRAD : EPI_DGLU;
    return !p->glu                                        ? EPI_PLAIN
           : p->glu->layout == FASTGLU_LAYOUT_INTERLEAVED ? EPI_GLU_INTERLEAVED
                                                          : EPI_GLU_SPLIT;
}

/* GEMM_SM90_DGLU=0: the dGLU kernels are not instantiated (EPI_PLAIN stands in, never picked) */
#define GEMM_DGLU_EPI(e) (GEMM_SM90_DGLU ? (e) : EPI_PLAIN)
#if defined(FASTGLU_GEMM_DEV_HOOKS)
#define GEMM_PICK_DEV(T)                                                                           \
    if (GEMM_SM90_DGLU && epi == EPI_DGLU_OLD)                                                     \
        return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU_OLD), 0, 256, MM_ANY>;                   \
    if (GEMM_SM90_DGLU && epi == EPI_DGRAD)                                                        \
        return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGRAD), 1, 256, MM_ANY>;
/* the other cluster size than the build's, for the plain GEMM and the TMA-store SPLIT */
#define GEMM_CL_ALT (3 - GEMM_CLUSTER)
#define GEMM_PICK_CLUSTER(T)                                                                       \
    if (cluster_force == GEMM_CL_ALT && (epi == EPI_PLAIN || (epi == EPI_GLU_SPLIT && ts))) {      \
        *cl = GEMM_CL_ALT;                                                                         \
        if (epi == EPI_PLAIN && bn == 192)                                                         \
            return ts ? gemm_sm90_kernel<T, EPI_PLAIN, 1, 192, MM_ANY, GEMM_CL_ALT>                \
                      : gemm_sm90_kernel<T, EPI_PLAIN, 0, 192, MM_ANY, GEMM_CL_ALT>;               \
        if (epi == EPI_PLAIN)                                                                      \
            return ts ? gemm_sm90_kernel<T, EPI_PLAIN, 1, 256, MM_ANY, GEMM_CL_ALT>                \
                      : gemm_sm90_kernel<T, EPI_PLAIN, 0, 256, MM_ANY, GEMM_CL_ALT>;               \
        if (mm == MM_K) return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_K, GEMM_CL_ALT>;      \
        if (mm == MM_KCLAMP)                                                                       \
            return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_KCLAMP, GEMM_CL_ALT>;             \
        if (mm == MM_GELU)                                                                         \
            return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_GELU, GEMM_CL_ALT>;               \
        return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_ANY, GEMM_CL_ALT>;                    \
    }
#else
#define GEMM_PICK_DEV(T)
#define GEMM_PICK_CLUSTER(T)
#endif

/* the kernel of the problem; *cl: its blocks per cluster; bm 192: the plain TMA-store GEMM with
 * three consumer warpgroups */
static gemm_kernel_fn pick_kernel(int epi, int ts, int bm, int bn, int mm, fastglu_dtype dt,
                                  int *cl) {
    *cl = GEMM_CLUSTER;
#define GEMM_PICK(T)                                                                               \
    if (epi == EPI_PLAIN && ts && bm == 192)                                                       \
        return gemm_sm90_kernel<T, EPI_PLAIN, 1, 192, MM_ANY, GEMM_CLUSTER, 3>;                    \
    GEMM_PICK_CLUSTER(T)                                                                           \
    if (epi == EPI_PLAIN && bn == 192)                                                             \
        return ts ? gemm_sm90_kernel<T, EPI_PLAIN, 1, 192, MM_ANY>                                 \
                  : gemm_sm90_kernel<T, EPI_PLAIN, 0, 192, MM_ANY>;                                \
    if (epi == EPI_PLAIN)                                                                          \
        return ts ? gemm_sm90_kernel<T, EPI_PLAIN, 1, 256, MM_ANY>                                 \
                  : gemm_sm90_kernel<T, EPI_PLAIN, 0, 256, MM_ANY>;                                \
    if (epi == EPI_GLU_SPLIT && ts) {                                                              \
        if (mm == MM_K) return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_K>;                   \
        if (mm == MM_KCLAMP) return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_KCLAMP>;         \
        if (mm == MM_GELU) return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_GELU>;             \
        return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 1, 256, MM_ANY>;                                 \
    }                                                                                              \
    if (epi == EPI_GLU_SPLIT) return gemm_sm90_kernel<T, EPI_GLU_SPLIT, 0, 256, MM_ANY>;           \
    if (GEMM_SM90_DGLU && GEMM_DGLU_STEPS(epi, ts)) {                                              \
        if (mm == MM_K) return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU), 1, 256, MM_K>;         \
        if (mm == MM_KCLAMP)                                                                       \
            return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU), 1, 256, MM_KCLAMP>;                \
        if (mm == MM_GELU) return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU), 1, 256, MM_GELU>;   \
        return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU), 1, 256, MM_ANY>;                       \
    }                                                                                              \
    if (GEMM_SM90_DGLU && epi == EPI_DGLU)                                                         \
        return gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU), 0, 256, MM_ANY>;                       \
    if (GEMM_SM90_DGLU && epi == EPI_DGLU_DW)                                                      \
        return ts ? gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU_DW), 1, 256, MM_ANY>                \
                  : gemm_sm90_kernel<T, GEMM_DGLU_EPI(EPI_DGLU_DW), 0, 256, MM_ANY>;               \
    GEMM_PICK_DEV(T)                                                                               \
    return gemm_sm90_kernel<T, EPI_GLU_INTERLEAVED, 0, 256, MM_ANY>;
    if (dt == FASTGLU_DTYPE_BF16) {
        GEMM_PICK(__nv_bfloat16)
    }
    GEMM_PICK(__half)
#undef GEMM_PICK
}

/* [rows, cols] output for the TMA-store epilogue: boxes of 64 x 64, 128-byte swizzle. */
static CUresult make_out_map(CUtensorMap *map, void *base, int64_t rows, int64_t cols,
                             int64_t row_stride, fastglu_dtype dtype) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {
        (cuuint64_t)(rows > 1 ? row_stride * 2 : (cols * 2 + 15) / 16 * 16)};
    const cuuint32_t box[2] = {64, 64}, elem[2] = {1, 1};
    return encode_tiled()(map,
                          dtype == FASTGLU_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                          2, base, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* The plain GEMM's tile: 128 x 256, 128 x 192 or (TMA-store epilogue) 192 x 192, the one with the
 * least cost: its waves (tiles over the multiprocessors, rounded up) times its area times a factor
 * for the shared-memory bytes each flop needs (the wgmma operands read and the TMA stages
 * written): 1 for 128 x 256, 1.02 for 128 x 192, GEMM_COST_192x192 for 192 x 192. The GLU and
 * dGLU epilogues take 128 x 256. */
#ifndef GEMM_COST_192x192
#define GEMM_COST_192x192 1.0
#endif
static void choose_tile(const fastglu_gemm_problem *p, int sms, int ts, int *bm, int *bn) {
    *bm = GEMM_BM, *bn = 256;
    if (p->glu) return;
    static const struct {
        int bm, bn;
        double f;
    } tiles[3] = {{128, 256, 1.0}, {128, 192, 1.02}, {192, 192, GEMM_COST_192x192}};
    double best = 0;
    for (int i = 0; i < 3; i++) {
        /* 192 x 192 only with the TMA-store epilogue, in a build whose stages leave it room */
        if (tiles[i].bm == 192 && (!ts || GEMM_SMEM_BYTES(3) > 227 * 1024)) continue;
        if ((bm_force && tiles[i].bm != bm_force) || (bn_force && tiles[i].bn != bn_force))
            continue;
        const int64_t n =
            ((p->M + tiles[i].bm - 1) / tiles[i].bm) * ((p->N + tiles[i].bn - 1) / tiles[i].bn);
        const double cost = (double)((n + sms - 1) / sms) * tiles[i].bm * tiles[i].bn * tiles[i].f;
        if (best == 0 || cost < best) best = cost, *bm = tiles[i].bm, *bn = tiles[i].bn;
    }
}

/* The tile order's group (row tiles visited before the next column tile): a wave of `sms` tiles
 * covers G row tiles and about sms / G column tiles, so it reads G * bm rows of x and
 * (sms / G) * bn rows of w, least at G = sqrt(sms * bn / bm): on 132 SMs 16.2 for 128 x 256, 14.1
 * for 128 x 192 (both take 16), 11.5 for 192 x 192 (12: ahead of 16 or level in three paired runs
 * at the 2880 shapes, by up to 4 %: bench/gemm/NOTES.md, version 16). */
static int group_of_tile(int bm) {
    if (group_m_setting > 0) return group_m_setting;
    return bm == 192 ? 12 : 16;
}

static int out_tma_ok(const void *base, int64_t row_stride, int64_t rows) {
    return base == NULL || ((uintptr_t)base % 16 == 0 && (rows <= 1 || row_stride % 8 == 0));
}

static int tma_store_epilogue(const fastglu_gemm_problem *p) {
    const int epi = epi_of(p);
    if (epi == EPI_DGRAD) return 1; /* development only: its callers pass aligned outputs */
    if (epi == EPI_GLU_INTERLEAVED || epi == EPI_DGLU_OLD || tma_store_off) return 0;
    if (epi == EPI_DGLU || epi == EPI_DGLU_DW) /* dh's up half: F elements on, F % 8 == 0 */
        return out_tma_ok(p->dh, p->dh_row_stride, p->M) &&
               out_tma_ok(p->y, p->y_row_stride, p->M) &&
               /* h's loads: up's columns at F + col, a signed 32-bit TMA coordinate */
               (epi == EPI_DGLU_DW ||
                (out_tma_ok(p->h, p->h_row_stride, p->M) && 2 * p->N < ((int64_t)1 << 31)));
    return out_tma_ok(p->h, p->h_row_stride, p->M) &&
           (epi == EPI_PLAIN || out_tma_ok(p->y, p->y_row_stride, p->M));
}

static int aligned(const void *p, uintptr_t n) { return ((uintptr_t)p % n) == 0; }

/* Taken: compute capability 9.0 with this file's sm_90a code loadable; BF16 / FP16; M, N, K >= 1;
 * K and N (F with the GLU) multiples of 8; x and w 16-byte aligned with row strides multiples of
 * 8 elements (TMA); row coordinates and K below 2^31 (TMA's signed 32-bit coordinates), row
 * strides below 2^39 bytes; h (and y with SPLIT) 4-byte aligned with even row strides (pairs are
 * stored as one 32-bit word); the tile count below 2^31. Indexing of the outputs is 64-bit. */
static int device_ok(int device);

/* fc2 dgrad + dGLU (EPI_DGLU): bf16 / fp16; M, N (F), K >= 1; K and F multiples of 8; dO (x) and
 * w2 (w, [K, F]) 16-byte aligned with row strides multiples of 8 and below 2^38 (TMA); SPLIT; h, dh
 * and y 4-byte aligned with even row strides (pairs as one 32-bit word); dweights (with weights)
 * only in a build without clusters (its row-owner order); coordinates and the tile count below
 * 2^31. */
static int dglu_supported(const fastglu_gemm_problem *p) {
    if (!GEMM_SM90_DGLU || !p->glu || p->glu->layout != FASTGLU_LAYOUT_SPLIT) return 0;
    /* (a build with more stages than the default may leave no room for the five buffers of the
     * TMA-store epilogue) */
    if (GEMM_SMEM_BYTES_OB(2, GEMM_OUT_BUFS_OF(EPI_DGLU, 1)) > 227 * 1024) return 0;
    if (p->dweights && (GEMM_CLUSTER != 1 || !p->weights)) return 0;
    if (p->dtype != FASTGLU_DTYPE_BF16 && p->dtype != FASTGLU_DTYPE_FP16) return 0;
    if (p->M < 1 || p->N < 1 || p->K < 1 || p->K % 8 || p->N % 8) return 0;
    const int64_t lim = ((int64_t)1 << 31) - 2 * GEMM_BN;
    if (p->M > lim || p->N > lim || p->K > lim) return 0;
    if (!aligned(p->x, 16) || !aligned(p->w, 16)) return 0;
    if ((p->M > 1 && (p->x_row_stride % 8 || p->x_row_stride >= ((int64_t)1 << 38))) ||
        (p->K > 1 && (p->w_row_stride % 8 || p->w_row_stride >= ((int64_t)1 << 38))))
        return 0;
    if (!aligned(p->h, 4) || !aligned(p->dh, 4) || (p->y && !aligned(p->y, 4))) return 0;
    if (p->M > 1 && (p->h_row_stride % 2 || p->dh_row_stride % 2 || (p->y && p->y_row_stride % 2)))
        return 0;
    if (p->weights && p->weights_dtype != FASTGLU_DTYPE_FP32 &&
        p->weights_dtype != FASTGLU_DTYPE_BF16 && p->weights_dtype != FASTGLU_DTYPE_FP16)
        return 0;
    const int64_t tiles = ((p->M + GEMM_BM - 1) / GEMM_BM) * ((p->N + GEMM_BN - 1) / GEMM_BN);
    return tiles < ((int64_t)1 << 31);
}

extern "C" int fastglu_gemm_sm90_supported(const fastglu_gemm_problem *p, int device) {
    if (!p || device < 0 || device >= 64) return 0;
    if (p->dglu) return dglu_supported(p) && device_ok(device);
    if (p->dtype != FASTGLU_DTYPE_BF16 && p->dtype != FASTGLU_DTYPE_FP16) return 0;
    if (p->M < 1 || p->N < 1 || p->K < 1 || p->K % 8 || p->N % 8) return 0;
    const int64_t lim = ((int64_t)1 << 31) - 2 * GEMM_BN;
    const int64_t w_rows = p->glu ? 2 * p->N : p->N;
    if (p->M > lim || w_rows > lim || p->K > lim) return 0;
    if (!aligned(p->x, 16) || !aligned(p->w, 16)) return 0;
    if ((p->M > 1 && (p->x_row_stride % 8 || p->x_row_stride >= ((int64_t)1 << 38))) ||
        (w_rows > 1 && (p->w_row_stride % 8 || p->w_row_stride >= ((int64_t)1 << 38))))
        return 0;
    if (p->h && (!aligned(p->h, 4) || (p->M > 1 && p->h_row_stride % 2))) return 0;
    if (!p->glu && !p->h) return 0;
    if (p->glu) {
        if (!p->y || !aligned(p->y, 2)) return 0;
        if (p->glu->layout == FASTGLU_LAYOUT_SPLIT &&
            (!aligned(p->y, 4) || (p->M > 1 && p->y_row_stride % 2)))
            return 0;
        if (p->weights && p->weights_dtype != FASTGLU_DTYPE_FP32 &&
            p->weights_dtype != FASTGLU_DTYPE_BF16 && p->weights_dtype != FASTGLU_DTYPE_FP16)
            return 0;
    }
    if (p->bias && !aligned(p->bias, 2)) return 0;
    const int64_t tiles = ((p->M + GEMM_BM - 1) / GEMM_BM) * ((w_rows + GEMM_BN - 1) / GEMM_BN);
    if (tiles >= ((int64_t)1 << 31)) return 0;
    return device_ok(device);
}

static int device_ok(int device) {
    static signed char ok_device[64]; /* 0 unknown, 1 yes, -1 no */
    if (!ok_device[device]) {
        int major = 0, minor = 0;
        struct cudaFuncAttributes attr;
        int ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
                     cudaSuccess &&
                 cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) ==
                     cudaSuccess &&
                 major == 9 && minor == 0 && encode_tiled() != NULL;
        /* the sm_90a image is in this build (binaryVersion 90), on the current device's context */
        int cur = -1;
        ok = ok && cudaGetDevice(&cur) == cudaSuccess && cur == device &&
             cudaFuncGetAttributes(
                 &attr, (const void *)gemm_sm90_kernel<__nv_bfloat16, EPI_PLAIN, 1, 256, MM_ANY>) ==
                 cudaSuccess &&
             attr.binaryVersion == 90;
        if (!ok && cur != device)
            return 0; /* not cached: asked about another device than the current one */
        ok_device[device] = ok ? 1 : -1;
    }
    return ok_device[device] == 1;
}

extern "C" fastglu_status fastglu_gemm_sm90_launch(const fastglu_gemm_problem *p, void *stream) {
    const fastglu_dtype dt = p->dtype;
    const int glu = p->glu != NULL,
              split = glu && !p->dglu && p->glu->layout == FASTGLU_LAYOUT_SPLIT;
    const int64_t w_rows = glu ? 2 * p->N : p->N;
    if (!encode_tiled())
        return fastglu_set_error(FASTGLU_ERROR_CUDA, "gemm_sm90: cuTensorMapEncodeTiled not found");
    CUtensorMap map_a, map_b0, map_b1;
    int dev = 0, sms = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess) return launch_status("gemm_sm90", err);
    const int ts = tma_store_epilogue(p);
    int bm, bn;
    choose_tile(p, sms, ts, &bm, &bn);
    const int nc = bm / 64, threads = 128 * (nc + 1);
    const int epi = epi_of(p), smem = GEMM_SMEM_BYTES_OB(nc, GEMM_OUT_BUFS_OF(epi, ts));
    CUresult r = make_map(&map_a, p->x, p->M, p->K, p->x_row_stride, dt, bm);
    if (r == CUDA_SUCCESS) {
        if (p->dglu) {
            r = make_map_mn(&map_b0, p->w, p->K, p->N, p->w_row_stride, dt);
            /* the TMA-store dGLU's steps load h through b1's place: one [M, 2F] tensor */
            if (r == CUDA_SUCCESS && GEMM_DGLU_STEPS(epi, ts))
                r = make_out_map(&map_b1, p->h, p->M, 2 * p->N, p->h_row_stride, dt);
            else
                map_b1 = map_b0;
        } else if (split) {
            r = make_map(&map_b0, p->w, p->N, p->K, p->w_row_stride, dt, bn / 2);
            if (r == CUDA_SUCCESS)
                r = make_map(&map_b1, (const char *)p->w + 2 * p->N * p->w_row_stride, p->N, p->K,
                             p->w_row_stride, dt, bn / 2);
        } else {
            r = make_map(&map_b0, p->w, w_rows, p->K, p->w_row_stride, dt, bn / 2);
            map_b1 = map_b0;
        }
    }
    CUtensorMap map_h0, map_h1, map_y;
    memset(&map_h0, 0, sizeof map_h0), memset(&map_h1, 0, sizeof map_h1),
        memset(&map_y, 0, sizeof map_y);
    if (r == CUDA_SUCCESS && ts) {
        if (p->dglu) {
            /* d_gate and d_up as two [M, F] tensors (dh's halves), y */
            r = make_out_map(&map_h0, p->dh, p->M, p->N, p->dh_row_stride, dt);
            if (r == CUDA_SUCCESS)
                r = make_out_map(&map_h1, (char *)p->dh + 2 * p->N, p->M, p->N, p->dh_row_stride,
                                 dt);
            if (r == CUDA_SUCCESS && p->y)
                r = make_out_map(&map_y, p->y, p->M, p->N, p->y_row_stride, dt);
        } else if (!glu) {
            r = make_out_map(&map_h0, p->h, p->M, p->N, p->h_row_stride, dt);
        } else {
            /* gate and up halves of h as two [M, F] tensors: an edge tile clips at F */
            if (p->h) r = make_out_map(&map_h0, p->h, p->M, p->N, p->h_row_stride, dt);
            if (p->h && r == CUDA_SUCCESS)
                r = make_out_map(&map_h1, (char *)p->h + 2 * p->N, p->M, p->N, p->h_row_stride, dt);
            if (r == CUDA_SUCCESS) r = make_out_map(&map_y, p->y, p->M, p->N, p->y_row_stride, dt);
        }
    }
    if (r != CUDA_SUCCESS)
        return fastglu_set_error(FASTGLU_ERROR_CUDA,
                                 "gemm_sm90: cuTensorMapEncodeTiled failed (%d)", (int)r);

    const int mm = !glu ? MM_ANY : mm_force >= 0 ? mm_force : math_mode_of(p->glu);
    int cl = GEMM_CLUSTER;
    const gemm_kernel_fn kern = pick_kernel(epi, ts, bm, bn, mm, dt, &cl);
    err =
        cudaFuncSetAttribute((const void *)kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return launch_status("gemm_sm90", err);

    gemm_args a;
    a.M = p->M;
    a.N = p->N;
    a.num_k_blocks = (int)((p->K + GEMM_BK - 1) / GEMM_BK);
    a.tiles_m = (int)((p->M + bm - 1) / bm);
    a.tiles_n = (int)(p->dglu ? (p->N + bn - 1) / bn
                      : split ? (p->N + bn / 2 - 1) / (bn / 2)
                              : (w_rows + bn - 1) / bn);
    a.group_m = group_of_tile(bm);
    a.bias = p->bias;
    a.weights = glu ? p->weights : NULL;
    a.weights_dtype = (int)p->weights_dtype;
    a.weights_stride = p->weights_stride;
    a.h = p->h;
    a.h_row_stride = p->h_row_stride;
    a.y = p->y;
    a.y_row_stride = p->y_row_stride;
    a.dh = p->dh;
    a.dh_row_stride = p->dh_row_stride;
    a.dweights = p->dweights;
    a.dweights_stride = p->dweights_stride;
    if (glu)
        a.m = make_math(p->glu, p->dtype, 0);
    else
        memset(&a.m, 0, sizeof a.m);
    void *args[] = {&map_a, &map_b0, &map_b1, &map_h0, &map_h1, &map_y, &a};
    if (cl == 1) {
        /* row-owner order with dweights: one block per row tile at most */
        const int tiles = p->dglu && p->dweights ? a.tiles_m : a.tiles_m * a.tiles_n;
        const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
        err = cudaLaunchKernel((const void *)kern, dim3(grid), dim3(threads), args, smem,
                               (cudaStream_t)stream);
    } else {
        const int units = (a.tiles_m + cl - 1) / cl * a.tiles_n;
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = cl, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(cl * (sms / cl)), cfg.blockDim = dim3(threads);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = (cudaStream_t)stream, cfg.attrs = attr, cfg.numAttrs = 1;
        /* a persistent grid must be resident at once: as many clusters as the GPCs hold (a GPC
         * whose free multiprocessors are odd leaves one idle), not the multiprocessors over 2 */
        static const void *occ_kern[32];
        static int occ_clusters[32];
        int max_units = 0;
        for (int i = 0; i < 32 && occ_kern[i]; i++)
            if (occ_kern[i] == (const void *)kern) max_units = occ_clusters[i];
        if (!max_units) {
            err = cudaOccupancyMaxActiveClusters(&max_units, (const void *)kern, &cfg);
            if (err != cudaSuccess || max_units < 1) max_units = sms / cl, err = cudaSuccess;
            for (int i = 0; i < 32; i++)
                if (!occ_kern[i]) {
                    occ_kern[i] = (const void *)kern, occ_clusters[i] = max_units;
                    break;
                }
        }
        cfg.gridDim = dim3((unsigned)((units < max_units ? units : max_units) * cl));
        err = cudaLaunchKernelExC(&cfg, (const void *)kern, args);
    }
    return launch_status("gemm_sm90", err);
}
