/* tests/emu/emu_threads.h — how the host emulations (glue.cpp, fp8_emu.cpp, gemm_emu.cpp,
 * sm90_emu.cpp) run a
 * kernel's grid: the definitions of blockIdx, threadIdx, gridDim, blockDim and the shim's access
 * counters, and two runners (emu_threads.cpp):
 *   emu_run_threads  every thread of the grid to its end, one after another, in the order emu_order
 *                    picks (forward, reverse, shuffled): for kernels without barriers or shuffles,
 *                    whose threads must not depend on each other's order; a __syncthreads() or a
 *                    shuffle there aborts (the kernel was registered as barrier-free wrongly).
 *   emu_run_blocks   the blocks one after another (in emu_order's order), each block's threads as
 *                    coroutines (ucontext) resumed in emu_order's order, each running until it
 *                    waits at __syncthreads() or a warp shuffle. A barrier counts the threads that
 *                    reach it (all of the block's; a shuffle: the lanes of its mask, which must
 *                    include the lane and its partner), so a thread that leaves the kernel early
 *                    or skips a barrier leaves the others waiting: reported as a deadlock (abort).
 * Include after cuda_runtime.h's shim and before the kernels' source: __syncthreads and
 * __shfl_xor_sync are defined here. The includer defines __shared__ (static for a kernel's
 * __shared__ arrays, which then live per template instantiation and outlast the block; empty where
 * the kernel has extern __shared__ memory of the includer's). */
#pragma once
#include "cuda_runtime.h"

typedef void (*emu_body)(void **args);
extern int emu_order; /* 0 forward, 1 reverse, 2 shuffled: threads, and the coroutine blocks */

void emu_run_threads(emu_body body, void **args, dim3 grid, dim3 block);
/* block_start (or NULL): called before each block's threads start (e.g. to fill shared memory with
 * junk) */
void emu_run_blocks(emu_body body, void **args, dim3 grid, dim3 block, void (*block_start)(void));

void emu_syncthreads(void);
unsigned emu_shfl_xor_u32(unsigned mask, unsigned v, int lane_mask);
/* __shfl_sync: lane src_lane's value to every lane of mask (which holds the lane and src_lane) */
unsigned emu_shfl_idx_u32(unsigned mask, unsigned v, int src_lane);
/* a 32-bit value of any type through one of the two */
template <typename V>
static inline V emu_shfl_as(unsigned (*shfl)(unsigned, unsigned, int), unsigned mask, V v,
                            int arg) {
    static_assert(sizeof(V) == 4, "32-bit shuffles only");
    unsigned u;
    memcpy(&u, &v, 4);
    u = shfl(mask, u, arg);
    memcpy(&v, &u, 4);
    return v;
}
template <typename V> static inline V emu_shfl_xor(unsigned mask, V v, int lane_mask) {
    return emu_shfl_as(emu_shfl_xor_u32, mask, v, lane_mask);
}
template <typename V> static inline V emu_shfl_idx(unsigned mask, V v, int src_lane) {
    return emu_shfl_as(emu_shfl_idx_u32, mask, v, src_lane);
}
/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (src/fp8_tile.cuh's ldsm_x4_trans), every lane of
 * the warp: each lane publishes its row address, then reads its elements from the rows of the
 * lanes that own them; a row address not on 16 bytes aborts */
void emu_ldsm_x4_trans(unsigned r[4], const void *row);
/* bar.sync id, count: waits until `count` threads of the block have arrived at barrier `id` */
void emu_named_barrier(int id, int count);
/* a thread that waits on state other threads change (an mbarrier's phase: tests/emu/
 * sm90_emu_ptx.h) gives way to them; emu_progress marks such a change, so that a pass in which
 * every live thread only gave way is reported as a deadlock */
void emu_yield(void);
void emu_progress(void);
#define __syncthreads emu_syncthreads
#define __shfl_xor_sync emu_shfl_xor
#define __shfl_sync emu_shfl_idx

/* coroutine blocks run, barriers passed (every thread's arrival), shuffles exchanged */
extern long emu_blocks_run, emu_barriers, emu_shuffles;
