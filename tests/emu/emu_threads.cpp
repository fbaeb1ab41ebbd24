/* tests/emu/emu_threads.cpp — the grid runners of the host emulations: see emu_threads.h. */
#include <ucontext.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "emu_threads.h"

dim3 blockIdx, threadIdx, gridDim, blockDim;
long emu_misaligned, emu_ldg, emu_ldcs, emu_stcs, emu_ldplain;
int emu_order = 0;
int emu_sm_count = 3;
long emu_blocks_run, emu_barriers, emu_shuffles;

static uint64_t shuf_state = 0x243F6A8885A308D3ull;
static std::vector<uint64_t> make_order(uint64_t n) {
    std::vector<uint64_t> order(n);
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    if (emu_order == 1) std::reverse(order.begin(), order.end());
    if (emu_order == 2)
        for (uint64_t i = n; i > 1; i--) {
            shuf_state ^= shuf_state << 13;
            shuf_state ^= shuf_state >> 7;
            shuf_state ^= shuf_state << 17;
            std::swap(order[i - 1], order[shuf_state % i]);
        }
    return order;
}

static void check_dims(dim3 grid, dim3 block) {
    if (grid.z != 1 || block.y != 1 || block.z != 1 || block.x < 1 || block.x > 1024) {
        fprintf(stderr, "EMU: unsupported launch shape grid (%u, %u, %u) block (%u, %u, %u)\n",
                grid.x, grid.y, grid.z, block.x, block.y, block.z);
        abort();
    }
}

/* ---- threads one after another ------------------------------------------------------------- */

static int in_coroutines; /* 1 while emu_run_blocks runs a block */

void emu_run_threads(emu_body body, void **args, dim3 grid, dim3 block) {
    check_dims(grid, block);
    gridDim = grid, blockDim = block;
    const uint64_t per_row = (uint64_t)grid.x * block.x;
    for (uint64_t k : make_order(per_row * grid.y)) {
        const uint64_t b = k / block.x;
        blockIdx = dim3((unsigned)(b % grid.x), (unsigned)(b / grid.x));
        threadIdx = dim3((unsigned)(k % block.x));
        body(args);
    }
}

/* ---- a block's threads as coroutines --------------------------------------------------------- */

static ucontext_t sched_ctx;
static std::vector<ucontext_t> th_ctx;
static std::vector<std::vector<char>> stacks;
static std::vector<int> done;
static int cur, nthreads;
static long
    progress; /* arrivals and completions: a pass of the scheduler without any is a deadlock */
static emu_body cur_body;
static void **cur_args;

typedef struct barrier {
    int arrived;
    long phase;
} barrier;
static barrier block_bar;                                     /* __syncthreads() */
static std::map<std::pair<int, unsigned>, barrier> warp_bars; /* shuffles: (warp, mask) */
static std::map<int, barrier> named_bars;                     /* bar.sync id, count */

/* Waits until every thread of the group (count threads) has arrived at b (a map's element: its
 * address stays valid while the block runs). */
static void arrive(barrier &b, int count) {
    if (!in_coroutines) {
        fprintf(stderr, "EMU: a barrier or shuffle in a kernel run without coroutines\n");
        abort();
    }
    const long phase = b.phase;
    progress++;
    if (++b.arrived == count) {
        b.arrived = 0, b.phase++;
        return;
    }
    while (b.phase == phase) swapcontext(&th_ctx[cur], &sched_ctx);
}

void emu_syncthreads(void) {
    emu_barriers++;
    arrive(block_bar, nthreads);
}

static unsigned slots[1024];
unsigned emu_shfl_xor_u32(unsigned mask, unsigned v, int o) {
    const int t = cur, warp = t / 32, lane = t % 32;
    if (!in_coroutines || !(mask >> lane & 1u) || !(mask >> (lane ^ o) & 1u) ||
        warp * 32 + 32 > nthreads) {
        fprintf(stderr, "EMU: shuffle: lane %d or its partner %d outside mask %08x (or no warp)\n",
                lane, lane ^ o, mask);
        abort();
    }
    emu_shuffles++;
    barrier &b = warp_bars[std::make_pair(warp, mask)];
    const int count = __builtin_popcount(mask);
    slots[t] = v;
    arrive(b, count); /* every lane of the group has written */
    const unsigned r = slots[warp * 32 + (lane ^ o)];
    arrive(b, count); /* every lane has read before any writes again */
    return r;
}

unsigned emu_shfl_idx_u32(unsigned mask, unsigned v, int src) {
    const int t = cur, warp = t / 32, lane = t % 32;
    if (!in_coroutines || src < 0 || src > 31 || !(mask >> lane & 1u) || !(mask >> src & 1u) ||
        warp * 32 + 32 > nthreads) {
        fprintf(stderr, "EMU: shuffle: lane %d or its source %d outside mask %08x (or no warp)\n",
                lane, src, mask);
        abort();
    }
    emu_shuffles++;
    barrier &b = warp_bars[std::make_pair(warp, mask)];
    const int count = __builtin_popcount(mask);
    slots[t] = v;
    arrive(b, count);
    const unsigned r = slots[warp * 32 + src];
    arrive(b, count);
    return r;
}

void emu_named_barrier(int id, int count) {
    if (count <= 0 || count > nthreads || count % 32) {
        fprintf(stderr, "EMU: bar.sync %d, %d: not a multiple of a warp within the block\n", id,
                count);
        abort();
    }
    emu_barriers++;
    arrive(named_bars[id], count);
}

void emu_yield(void) {
    if (!in_coroutines) {
        fprintf(stderr, "EMU: a wait on other threads in a kernel run without coroutines\n");
        abort();
    }
    swapcontext(&th_ctx[cur], &sched_ctx);
}

void emu_progress(void) { progress++; }

static const void *rows[1024];
void emu_ldsm_x4_trans(unsigned r[4], const void *row) {
    const int t = cur, warp = t / 32, lane = t % 32;
    if (!in_coroutines || warp * 32 + 32 > nthreads || (uintptr_t)row % 16) {
        fprintf(stderr, "EMU: ldmatrix: lane %d's row %p (not on 16 bytes, or no warp)\n", lane,
                row);
        abort();
    }
    emu_shuffles++;
    barrier &b = warp_bars[std::make_pair(warp, 0xffffffffu)];
    rows[t] = row;
    arrive(b, 32); /* every lane's address is published */
    for (int i = 0; i < 4; ++i) {
        uint16_t lo, hi;
        memcpy(&lo, (const uint16_t *)rows[warp * 32 + 8 * i + 2 * (lane % 4)] + lane / 4, 2);
        memcpy(&hi, (const uint16_t *)rows[warp * 32 + 8 * i + 2 * (lane % 4) + 1] + lane / 4, 2);
        r[i] = lo | (unsigned)hi << 16;
    }
    arrive(b, 32); /* every lane has read before any publishes again */
}

static void trampoline(void) {
    cur_body(cur_args);
    done[cur] = 1;
    progress++;
}

void emu_run_blocks(emu_body body, void **args, dim3 grid, dim3 block, void (*block_start)(void)) {
    check_dims(grid, block);
    gridDim = grid, blockDim = block;
    nthreads = (int)block.x;
    cur_body = body, cur_args = args;
    th_ctx.resize(nthreads), done.resize(nthreads), stacks.resize(nthreads);
    const std::vector<uint64_t> threads = make_order((uint64_t)nthreads);
    for (uint64_t b : make_order((uint64_t)grid.x * grid.y)) {
        blockIdx = dim3((unsigned)(b % grid.x), (unsigned)(b / grid.x), 0);
        emu_blocks_run++;
        if (block_start) block_start();
        block_bar.arrived = 0, block_bar.phase = 0;
        warp_bars.clear(), named_bars.clear();
        for (int t = 0; t < nthreads; ++t) {
            stacks[t].resize(1 << 16); /* ASan clears a stack's shadow at each switch: kept small */
            getcontext(&th_ctx[t]);
            th_ctx[t].uc_stack.ss_sp = stacks[t].data();
            th_ctx[t].uc_stack.ss_size = stacks[t].size();
            th_ctx[t].uc_link = &sched_ctx;
            makecontext(&th_ctx[t], trampoline, 0);
            done[t] = 0;
        }
        in_coroutines = 1;
        for (int live = nthreads; live > 0;) { /* a pass: each live thread up to its next wait */
            const long before = progress;
            live = 0;
            for (uint64_t t : threads) {
                if (done[t]) continue;
                cur = (int)t, threadIdx = dim3((unsigned)t, 0, 0);
                swapcontext(&sched_ctx, &th_ctx[t]);
                live += !done[t];
            }
            if (live && progress == before) {
                fprintf(stderr,
                        "EMU: deadlock: %d threads of block (%u, %u) wait at a barrier "
                        "the others never reach\n",
                        live, blockIdx.x, blockIdx.y);
                abort();
            }
        }
        in_coroutines = 0;
    }
}
