/* tests/emu/sm90_emu_ptx.h — src/gemm_sm90.cu's PTX helpers (mbarriers, TMA, bulk groups, named
 * barriers, wgmma) on the host, for tests/emu/sm90_emu.cpp: included by gemm_sm90.cu in place of
 * its inline PTX when FASTGLU_HOST_EMULATION is defined. The block's threads are coroutines
 * (tests/emu/emu_threads.h); shared memory is the emulation's smem_raw, a shared-memory address
 * its offset there.
 *
 * What the hardware does, as far as the kernel relies on it:
 *   mbarrier   an expected arrival count and a transaction count; a phase completes when both
 *              reach zero (then the arrivals are expected again); try_wait.parity P returns once
 *              the current phase's parity differs from P. More arrivals or bytes than a phase
 *              still waits for abort (the bytes before their expect_tx too, which the hardware
 *              allows; the kernel always expects first); an arrival after a phase completed counts
 *              toward the next one, as on the hardware.
 *   TMA load   the box (inner dimension 128 bytes) written row by row, 128-byte swizzled (a
 *              16-byte chunk's address bits 4-6 XORed with bits 7-9), zeros outside the tensor;
 *              its bytes then complete on the mbarrier. It runs when a thread first waits on
 *              that mbarrier, not when issued; until then its box holds 0xff bytes (NaN in both
 *              16-bit dtypes), so that a read before the wait sees no data. A thread's 4-byte
 *              shared-memory read (ld_shared_u32) of a loaded box aborts unless that thread
 *              itself waited past the load's phase: another thread's wait does not order it.
 *   TMA store  the box read from shared memory (swizzled) and written clipped to the tensor. It
 *              runs when the issuing thread's bulk group is waited for (wait_group.read N leaves
 *              the newest N), not when issued: a kernel that rewrote the staging buffer before
 *              that wait would store the new contents, as the hardware may.
 *   wgmma      m64nNk16, fp32 accumulators in the thread's registers (row 16 warp + lane / 4 +
 *              8 e, column 8 i + 2 (lane % 4) + b at d[4 i + 2 e + b]), A and B through
 *              128-byte-swizzled descriptors (K-major; B also MN-major). The products of a
 *              commit group run when the thread waits for the group (wait_group N leaves the
 *              newest N), reading shared memory then: a stage released to the producer before its
 *              wgmma was waited for would be read after the producer refilled it.
 * Clusters are not emulated (the launch refuses a cluster dimension other than 1). */
#pragma once
#include <deque>
#include <map>
#include <vector>

static inline uint32_t smem_u32(const void *p) {
    return (uint32_t)((const unsigned char *)p - smem_raw);
}
/* the launch's dynamic shared memory (sm90_emu.cpp sets it): an access past it aborts, as a
 * layout that outgrew the host's size would fault on the GPU */
static size_t emu_smem_bytes = sizeof smem_raw;
static inline unsigned char *emu_smem_at(uint32_t addr, size_t bytes) {
    if ((size_t)addr + bytes > emu_smem_bytes) {
        fprintf(stderr, "EMU: shared-memory access at %u (+%zu) past the launch's %zu bytes\n",
                addr, bytes, emu_smem_bytes);
        abort();
    }
    return smem_raw + addr;
}
/* the 128-byte swizzle of a 16-byte chunk's address */
static inline uint32_t emu_swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

/* ---- mbarriers -------------------------------------------------------------------------------- */

typedef struct emu_mbar {
    int count, pending; /* arrivals a phase expects, arrivals still missing */
    long tx;            /* transaction bytes still missing */
    unsigned phase;     /* phases completed */
} emu_mbar;
static std::map<uint32_t, emu_mbar> emu_mbars; /* by shared-memory address; cleared per block */

static inline emu_mbar &emu_mbar_at(uint32_t bar) {
    std::map<uint32_t, emu_mbar>::iterator it = emu_mbars.find(bar);
    if (it == emu_mbars.end()) {
        fprintf(stderr, "EMU: mbarrier at %u used before mbarrier.init\n", bar);
        abort();
    }
    return it->second;
}
static inline void emu_mbar_check(emu_mbar &m, uint32_t bar) {
    if (m.pending < 0 || m.tx < 0) {
        fprintf(stderr, "EMU: mbarrier at %u: %d arrivals, %ld bytes past its phase\n", bar,
                -m.pending, -m.tx);
        abort();
    }
    if (m.pending == 0 && m.tx == 0) m.phase++, m.pending = m.count, emu_progress();
}
static inline void mbar_init(uint32_t bar, uint32_t count) {
    emu_smem_at(bar, 8); /* (within the launch's shared memory) */
    emu_mbar m = {(int)count, (int)count, 0, 0};
    emu_mbars[bar] = m;
}
static inline void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    emu_mbar &m = emu_mbar_at(bar);
    m.tx += bytes, m.pending--;
    emu_mbar_check(m, bar);
}
static inline void mbar_arrive(uint32_t bar) {
    emu_mbar &m = emu_mbar_at(bar);
    m.pending--;
    emu_progress();
    emu_mbar_check(m, bar);
}
static inline void emu_run_loads(uint32_t bar);
/* the phases each thread has seen complete on each mbarrier, through its own waits */
static std::map<uint32_t, unsigned> emu_seen[1024];
static inline void mbar_wait(uint32_t bar, uint32_t parity) {
    emu_run_loads(bar);
    while ((emu_mbar_at(bar).phase & 1u) == parity) {
        emu_yield();
        emu_run_loads(bar);
    }
    emu_seen[threadIdx.x][bar] = emu_mbar_at(bar).phase;
    emu_progress();
}
static inline void fence_mbarrier_init(void) {}

/* ---- TMA -------------------------------------------------------------------------------------- */

/* what emu_encode_tiled (tests/emu/sm90_emu.cpp) keeps in a CUtensorMap */
typedef struct emu_tmap {
    const unsigned char *base;
    uint64_t dims[2]; /* elements: inner, outer */
    uint64_t stride;  /* bytes between outer rows */
    uint32_t box[2];  /* elements */
    uint32_t esize;   /* bytes */
    int swizzle128;
} emu_tmap;
static inline const emu_tmap *emu_tmap_of(const CUtensorMap *map) {
    return (const emu_tmap *)(const void *)map;
}

static long emu_tma_loads, emu_tma_stores;

/* a TMA load waiting for a thread's wait on its mbarrier */
typedef struct emu_tma_load_op {
    const emu_tmap *t;
    uint32_t dst, bar;
    int c0, c1;
} emu_tma_load_op;
static std::vector<emu_tma_load_op> emu_pending_loads; /* in issue order */
/* the boxes loaded so far (the newest one at an address replaces the older): where, and the
 * mbarrier phase a reader must have waited past */
typedef struct emu_loaded_box {
    uint32_t dst, bytes, bar;
    unsigned phase;
} emu_loaded_box;
static std::vector<emu_loaded_box> emu_loaded;

static inline void emu_run_load(const emu_tma_load_op &l) {
    const emu_tmap *t = l.t;
    const uint32_t dst = l.dst, pitch = t->box[0] * t->esize;
    const int c0 = l.c0, c1 = l.c1;
    for (uint32_t r = 0; r < t->box[1]; r++)
        for (uint32_t c = 0; c < t->box[0]; c++) {
            const int64_t g0 = (int64_t)c0 + c, g1 = (int64_t)c1 + r;
            const uint32_t a = emu_swizzle128(dst + r * pitch + c * t->esize);
            unsigned char *s = emu_smem_at(a, t->esize);
            if (g0 >= 0 && g1 >= 0 && (uint64_t)g0 < t->dims[0] && (uint64_t)g1 < t->dims[1])
                memcpy(s, t->base + (uint64_t)g1 * t->stride + (uint64_t)g0 * t->esize, t->esize);
            else
                memset(s, 0, t->esize);
        }
    emu_tma_loads++;
    emu_mbar &m = emu_mbar_at(l.bar);
    const emu_loaded_box b = {dst, pitch * t->box[1], l.bar, m.phase + 1};
    size_t i = 0;
    while (i < emu_loaded.size() && emu_loaded[i].dst != dst) i++;
    if (i == emu_loaded.size())
        emu_loaded.push_back(b);
    else
        emu_loaded[i] = b;
    m.tx -= (long)t->box[0] * t->box[1] * t->esize;
    emu_mbar_check(m, l.bar);
}
/* the loads pending on mbarrier bar, oldest first */
static inline void emu_run_loads(uint32_t bar) {
    for (size_t i = 0; i < emu_pending_loads.size();)
        if (emu_pending_loads[i].bar == bar) {
            const emu_tma_load_op l = emu_pending_loads[i];
            emu_pending_loads.erase(emu_pending_loads.begin() + (long)i);
            emu_run_load(l);
        } else {
            i++;
        }
}

static inline void tma_load_2d(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1) {
    const emu_tmap *t = emu_tmap_of(map);
    const uint32_t pitch = t->box[0] * t->esize;
    if (!t->swizzle128 || pitch != 128 || dst % 1024) {
        fprintf(stderr, "EMU: TMA load: a box of %u bytes a row to %u (128-byte swizzle wanted)\n",
                pitch, dst);
        abort();
    }
    emu_mbar_at(bar); /* (initialised) */
    memset(emu_smem_at(dst, (size_t)pitch * t->box[1]), 0xff, (size_t)pitch * t->box[1]);
    const emu_tma_load_op l = {t, dst, bar, c0, c1};
    emu_pending_loads.push_back(l);
    emu_progress();
}

/* a TMA store waiting for its bulk group's wait (per thread: the open group, then the committed
 * ones, oldest first) */
typedef struct emu_store {
    const emu_tmap *map;
    uint32_t src;
    int c0, c1;
} emu_store;
static std::vector<emu_store> emu_open_stores[1024];
static std::deque<std::vector<emu_store>> emu_store_groups[1024];

static inline void emu_run_store(const emu_store &st) {
    const emu_tmap *t = st.map;
    const uint32_t pitch = t->box[0] * t->esize;
    for (uint32_t r = 0; r < t->box[1]; r++)
        for (uint32_t c = 0; c < t->box[0]; c++) {
            const int64_t g0 = (int64_t)st.c0 + c, g1 = (int64_t)st.c1 + r;
            if (g0 < 0 || g1 < 0 || (uint64_t)g0 >= t->dims[0] || (uint64_t)g1 >= t->dims[1])
                continue;
            const unsigned char *s =
                emu_smem_at(emu_swizzle128(st.src + r * pitch + c * t->esize), t->esize);
            memcpy((unsigned char *)t->base + (uint64_t)g1 * t->stride + (uint64_t)g0 * t->esize, s,
                   t->esize);
        }
    emu_tma_stores++;
}
static inline void tma_store_2d(const CUtensorMap *map, uint32_t src, int col, int row) {
    const emu_tmap *t = emu_tmap_of(map);
    if (!t->base || !t->swizzle128 || t->box[0] * t->esize != 128 || src % 1024) {
        fprintf(stderr, "EMU: TMA store from %u through a map without a tensor or swizzle\n", src);
        abort();
    }
    const emu_store st = {t, src, col, row};
    emu_open_stores[threadIdx.x].push_back(st);
}
static inline void bulk_commit(void) {
    emu_store_groups[threadIdx.x].push_back(emu_open_stores[threadIdx.x]);
    emu_open_stores[threadIdx.x].clear();
}
static inline void emu_bulk_wait(size_t keep) {
    std::deque<std::vector<emu_store>> &g = emu_store_groups[threadIdx.x];
    while (g.size() > keep) {
        for (size_t i = 0; i < g.front().size(); i++) emu_run_store(g.front()[i]);
        g.pop_front();
    }
}
template <int N> static inline void bulk_wait_read(void) { emu_bulk_wait(N); }
static inline void bulk_wait_all(void) { emu_bulk_wait(0); }
static inline void fence_proxy_async(void) {}
static inline void st_shared_u32(uint32_t addr, uint32_t v) { memcpy(emu_smem_at(addr, 4), &v, 4); }
static inline uint32_t ld_shared_u32(uint32_t addr) {
    for (size_t i = 0; i < emu_loaded.size(); i++) {
        const emu_loaded_box &b = emu_loaded[i];
        if (addr >= b.dst && addr < b.dst + b.bytes) {
            std::map<uint32_t, unsigned>::const_iterator it = emu_seen[threadIdx.x].find(b.bar);
            if (it == emu_seen[threadIdx.x].end() || it->second < b.phase) {
                fprintf(stderr,
                        "EMU: thread %u read shared memory at %u, loaded by TMA, before its own "
                        "wait on the load's mbarrier\n",
                        threadIdx.x, addr);
                abort();
            }
        }
    }
    uint32_t v;
    memcpy(&v, emu_smem_at(addr, 4), 4);
    return v;
}
static inline void prefetch_l2(const void *) {}

static inline void named_bar_sync(int id, int n) { emu_named_barrier(id, n); }
static inline void setmaxnreg_dec40(void) {}
template <int R> static inline void setmaxnreg_inc(void) {}

/* clusters: not emulated */
static inline uint32_t cluster_ctarank(void) { return 0; }
static inline void cluster_sync(void) {
    fprintf(stderr, "EMU: clusters are not emulated\n");
    abort();
}
static inline void mbar_arrive_peer(uint32_t, uint32_t) { cluster_sync(); }
static inline void tma_load_2d_mc(uint32_t, const CUtensorMap *, uint32_t, int, int, uint16_t) {
    cluster_sync();
}

/* ---- wgmma ------------------------------------------------------------------------------------ */

typedef struct emu_mma {
    float *d;
    uint64_t da, db;
    int n, tb, f16;
} emu_mma;
static std::vector<emu_mma> emu_open_mma[1024];
static std::deque<std::vector<emu_mma>> emu_mma_groups[1024];
static long emu_mma_run;

/* element (row, k) of a K-major operand, (n, k) of an MN-major B: 128-byte swizzle, SBO the next 8
 * rows (K-major) or the next 8 k (MN-major), LBO the next 64 n (MN-major) */
static inline float emu_operand(uint64_t desc, int row, int k, int mn_major, int f16) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4,
                   lbo = (uint32_t)((desc >> 16) & 0x3FFF) << 4,
                   sbo = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    if ((desc >> 62) != 1) {
        fprintf(stderr, "EMU: wgmma descriptor without the 128-byte swizzle\n");
        abort();
    }
    const uint32_t a =
        mn_major ? start + (row % 64) * 2 + (row / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo
                 : start + (row / 8) * sbo + (row % 8) * 128 + k * 2;
    uint16_t v;
    memcpy(&v, emu_smem_at(emu_swizzle128(a), 2), 2);
    return f16 ? fp16_to_f32(v) : bf16_to_f32(v);
}
static inline void emu_run_mma(const emu_mma &op) {
    const int lt = threadIdx.x % 128, warp = lt / 32, lane = lt % 32;
    for (int e = 0; e < 2; e++) {
        const int m = 16 * warp + lane / 4 + 8 * e;
        float av[16];
        for (int k = 0; k < 16; k++) av[k] = emu_operand(op.da, m, k, 0, op.f16);
        for (int i = 0; i < op.n / 8; i++)
            for (int b = 0; b < 2; b++) {
                const int n = 8 * i + 2 * (lane % 4) + b;
                float acc = op.d[4 * i + 2 * e + b];
                for (int k = 0; k < 16; k++)
                    acc = fmaf(av[k], emu_operand(op.db, n, k, op.tb, op.f16), acc);
                op.d[4 * i + 2 * e + b] = acc;
            }
    }
    emu_mma_run++;
}
static inline void wgmma_fence(void) {}
static inline void wgmma_commit(void) {
    emu_mma_groups[threadIdx.x].push_back(emu_open_mma[threadIdx.x]);
    emu_open_mma[threadIdx.x].clear();
}
template <int N> static inline void wgmma_wait(void) {
    std::deque<std::vector<emu_mma>> &g = emu_mma_groups[threadIdx.x];
    while (g.size() > (size_t)N) {
        for (size_t i = 0; i < g.front().size(); i++) emu_run_mma(g.front()[i]);
        g.pop_front();
    }
}
static inline void emu_issue_mma(float *d, uint64_t da, uint64_t db, int n, int tb, int f16) {
    const emu_mma op = {d, da, db, n, tb, f16};
    emu_open_mma[threadIdx.x].push_back(op);
}
template <int TB> static inline void wgmma_m64n256k16_bf16(float *d, uint64_t da, uint64_t db) {
    emu_issue_mma(d, da, db, 256, TB, 0);
}
template <int TB> static inline void wgmma_m64n256k16_f16(float *d, uint64_t da, uint64_t db) {
    emu_issue_mma(d, da, db, 256, TB, 1);
}
template <int TB> static inline void wgmma_m64n192k16_bf16(float *d, uint64_t da, uint64_t db) {
    emu_issue_mma(d, da, db, 192, TB, 0);
}
template <int TB> static inline void wgmma_m64n192k16_f16(float *d, uint64_t da, uint64_t db) {
    emu_issue_mma(d, da, db, 192, TB, 1);
}
