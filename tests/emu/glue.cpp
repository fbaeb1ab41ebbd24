/* tests/emu/glue.cpp — src/glu_cuda.cu compiled as host C++ (tests/emu/shim stands in for the CUDA
 * headers): its launchers fastglu_glu_fwd_cuda / fastglu_glu_bwd_cuda as they are, and every kernel
 * they dispatch to: the plain-SwiGLU kernels of src/glu_swiglu.cuh, the family's flat forward and
 * backward, the tile kernel and the reduction, general and specialised. cudaLaunchKernel (and the
 * reduction's cudaLaunchKernelExC) look the kernel pointer up in a registry built from
 * glu_cuda.cu's own kernel tables and run the grid (tests/emu/emu_threads.h): kernels with
 * barriers or shuffles (the tile kernel, the reduction, the flat backward that sums dweights)
 * block by block with the threads as coroutines, the others thread by thread in emu_order's
 * order. tests/emu/harness.cpp compares the results with the CPU backend. */
#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define __shared__ static
#include "cuda_runtime.h"
#include "emu_threads.h"

#include "glu_cuda.cu"

extern "C" {
long emu_bad_launch = 0, emu_launches = 0, emu_multi_iter = 0, emu_pdl_launches = 0;
}

/* What a kernel is: how its grid runs and what its launch is checked against. */
enum kind {
    K_SWIGLU_FWD,
    K_SWIGLU_ALIGNED,
    K_SWIGLU_FLAT,
    K_SWIGLU_BWD,
    K_FWD,
    K_BWD,
    K_TILE,
    K_RED
};
static const char *const kind_names[] = {
    "swiglu fwd", "swiglu fwd aligned", "swiglu fwd flat", "swiglu bwd",
    "glu fwd",    "glu bwd (flat)",     "glu bwd tile",    "glu reduce"};
enum { NKINDS = 8 };

typedef void (*invoker)(const void *, void **);
struct entry {
    const void *f;
    invoker inv;
    std::string name;
    int kind, coroutines;
    long hits;
};
static std::vector<entry> registry;

template <typename... A, size_t... I>
static void call_impl(const void *f, void **args, std::index_sequence<I...>) {
    ((void (*)(A...))f)(
        *(typename std::remove_cv<typename std::remove_reference<A>::type>::type *)args[I]...);
}
template <typename... A> static void call(const void *f, void **args) {
    call_impl<A...>(f, args, std::index_sequence_for<A...>{});
}
/* registers f once (the kernel tables repeat a kernel where math modes share it) */
template <typename... A>
static void reg(void (*f)(A...), const std::string &name, int kind, int coroutines) {
    if (!f) return;
    for (const entry &e : registry)
        if (e.f == (const void *)f) return;
    registry.push_back({(const void *)f, &call<A...>, name, kind, coroutines, 0});
}

static const char *const dt_names[] = {"f32", "f16", "bf16"};
static std::string nm(const char *what, int d, int fp8, int il, int mm, int c) {
    char b[96];
    snprintf(b, sizeof b, "%s<%s%s,%s,mm%d,case%d>", what, dt_names[d], fp8 ? ",fp8in" : "",
             il ? "IL" : "SPLIT", mm, c);
    return b;
}

/* glu_swiglu.cuh's kernels with the policies glu_cuda.cu launches them with (the in-place
 * backward's plain loads included) */
template <typename T> static void reg_swiglu(int d) {
    const std::string t = dt_names[d];
    reg(swiglu_fwd_kernel<T, FASTGLU_LOAD, FASTGLU_STORE>, "swiglu_fwd<" + t + ">", K_SWIGLU_FWD,
        0);
    reg(swiglu_fwd_aligned_kernel<T, FASTGLU_LOAD, FASTGLU_STORE>, "swiglu_fwd_aligned<" + t + ">",
        K_SWIGLU_ALIGNED, 0);
    reg(swiglu_fwd_flat_kernel<T, FASTGLU_LOAD, FASTGLU_STORE>, "swiglu_fwd_flat<" + t + ">",
        K_SWIGLU_FLAT, 0);
    static const char *const dy[] = {"chunk", "scalar", "strided"};
    for (int lp = 0; lp < 2; ++lp)
        for (int m = 0; m < 3; ++m) {
            const std::string n = "swiglu_bwd<" + t + "," + dy[m] + (lp ? ",plain" : "") + ">";
#define BWDK(DY, LP) swiglu_bwd_kernel<T, DY, LP, FASTGLU_STORE>
            void (*k)(const T *, int64_t, int64_t, const T *, int64_t, const T *, int64_t, T *,
                      int64_t, T *, int64_t, int64_t, uint64_t, fastdiv, widths) =
                lp ? (m == 0   ? BWDK(DY_CHUNK, LOAD_PLAIN)
                      : m == 1 ? BWDK(DY_SCALAR, LOAD_PLAIN)
                               : BWDK(DY_STRIDED, LOAD_PLAIN))
                   : (m == 0   ? BWDK(DY_CHUNK, FASTGLU_LOAD)
                      : m == 1 ? BWDK(DY_SCALAR, FASTGLU_LOAD)
                               : BWDK(DY_STRIDED, FASTGLU_LOAD));
#undef BWDK
            reg(k, n, K_SWIGLU_BWD, 0);
        }
}

static void init_registry() {
    if (!registry.empty()) return;
    reg_swiglu<float>(0);
    reg_swiglu<__half>(1);
    reg_swiglu<__nv_bfloat16>(2);
    for (int d = 0; d < 3; ++d)
        for (int il = 0; il < 2; ++il)
            for (int mm = 0; mm < 4; ++mm)
                for (int c = 0; c < 9; ++c)
                    reg(fwd_kernels[d][il][mm][c], nm("fwd", d, 0, il, mm, c), K_FWD, 0);
    for (int d = 0; d < 3; ++d)
        for (int f8 = 0; f8 < 2; ++f8)
            for (int il = 0; il < 2; ++il)
                for (int mm = 0; mm < 4; ++mm) {
                    for (int c = 0; c < 6; ++c) /* case 5 sums dweights across the warp */
                        reg(bwd_kernels[d][f8][il][mm][c], nm("bwd", d, f8, il, mm, c), K_BWD,
                            c == 5);
                    for (int c = 0; c < 4; ++c)
                        reg(tile_kernels[d][f8][il][mm][c], nm("tile", d, f8, il, mm, c), K_TILE,
                            1);
                }
    for (int d = 0; d < 3; ++d)
        for (int il = 0; il < 2; ++il)
            reg(reduce_kernels[d][il], std::string("reduce<") + dt_names[d] + (il ? ",IL>" : ">"),
                K_RED, 1);
}

/* the launch's units of work (chunks, tiles, reduction blocks) against its threads or blocks */
static void account(const entry &e, dim3 grid, dim3 block, void **args) {
    const uint64_t threads = (uint64_t)grid.x * block.x;
    uint64_t work = 0, workers = threads;
    switch (e.kind) {
    case K_SWIGLU_ALIGNED:
        work = *(unsigned *)args[6];
        if (threads < work) { /* no grid-stride loop: a thread per chunk */
            emu_bad_launch++;
            fprintf(stderr, "EMU: %s launched with fewer threads than chunks\n", e.name.c_str());
        }
        break;
    case K_SWIGLU_FWD:
    case K_SWIGLU_FLAT: work = *(uint64_t *)args[7]; break;
    case K_SWIGLU_BWD: work = *(uint64_t *)args[12]; break;
    case K_FWD:
    case K_BWD: work = ((const glu_args *)args[0])->chunks; break;
    case K_TILE: {
        const glu_args *a = (const glu_args *)args[0];
        work = (uint64_t)((a->tokens + FASTGLU_SLAB_ROWS - 1) / FASTGLU_SLAB_ROWS) *
               (uint64_t)((a->F + FASTGLU_TILE_COLS - 1) / FASTGLU_TILE_COLS);
        workers = grid.x;
        break;
    }
    case K_RED: {
        const int64_t F = *(int64_t *)args[8], T = *(int64_t *)args[7];
        work = (*(void **)args[2] ? (uint64_t)(2 * F + 31) / 32 : 0) +
               (*(void **)args[5] ? (uint64_t)(T + 31) / 32 : 0);
        workers = grid.x;
        break;
    }
    }
    if (workers < work) emu_multi_iter++;
}

static int expected_block(const entry &e) {
    switch (e.kind) {
    case K_FWD:
    case K_BWD:
    case K_RED: return GLU_THREADS;
    case K_TILE: return TILE_WARPS * 32;
    default: return FASTGLU_THREADS;
    }
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t) {
    init_registry();
    entry *e = nullptr;
    for (auto &r : registry)
        if (r.f == func) e = &r;
    if (!e) {
        fprintf(stderr, "EMU: unregistered kernel %p\n", func);
        abort();
    }
    if (grid.x < 1 || grid.x > 2147483647u || grid.y != 1 || grid.z != 1 ||
        (int)block.x != expected_block(*e) || block.y != 1 || block.z != 1 || smem != 0) {
        emu_bad_launch++;
        fprintf(stderr, "EMU: bad launch %s grid %u block %u smem %zu\n", e->name.c_str(), grid.x,
                block.x, smem);
        return cudaErrorInvalidValue;
    }
    e->hits++;
    emu_launches++;
    account(*e, grid, block, args);
    static const entry *running; /* the body below runs it (a function pointer, no captures) */
    running = e;
    const emu_body body = [](void **a) { running->inv(running->f, a); };
    if (e->coroutines)
        emu_run_blocks(body, args, grid, block, NULL);
    else
        emu_run_threads(body, args, grid, block);
    return cudaSuccess;
}

/* The reduction's launch: a programmatic dependent of the kernel before it (which has finished
 * here: launches run to their end in order). */
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *func, void **args) {
    for (unsigned i = 0; i < cfg->numAttrs; ++i)
        if (cfg->attrs[i].id != cudaLaunchAttributeProgrammaticStreamSerialization) {
            emu_bad_launch++;
            fprintf(stderr, "EMU: launch attribute %d\n", (int)cfg->attrs[i].id);
            return cudaErrorInvalidValue;
        } else if (cfg->attrs[i].val.programmaticStreamSerializationAllowed) {
            emu_pdl_launches++;
        }
    return cudaLaunchKernel(func, cfg->gridDim, cfg->blockDim, args, cfg->dynamicSmemBytes,
                            cfg->stream);
}

/* kernels hit per kind, and the names of those never launched; returns how many were hit */
extern "C" long emu_report(void) {
    init_registry();
    long used = 0, per[NKINDS][2] = {};
    for (auto &r : registry) {
        used += r.hits != 0;
        per[r.kind][0] += r.hits != 0, per[r.kind][1]++;
    }
    printf("kernels hit %ld/%zu:", used, registry.size());
    for (int k = 0; k < NKINDS; ++k) printf(" %s %ld/%ld;", kind_names[k], per[k][0], per[k][1]);
    printf("\n");
    long missed = 0;
    for (auto &r : registry)
        if (!r.hits) printf("%s%s", missed++ ? " " : "never launched: ", r.name.c_str());
    if (missed) printf("\n");
    printf("launches %ld (programmatic dependents %ld) bad %ld grid-stride(multi-iteration) "
           "launches %ld; coroutine blocks %ld barriers %ld shuffles %ld; ldg %ld ldcs %ld "
           "ldplain %ld stcs %ld misaligned %ld\n",
           emu_launches, emu_pdl_launches, emu_bad_launch, emu_multi_iter, emu_blocks_run,
           emu_barriers, emu_shuffles, emu_ldg, emu_ldcs, emu_ldplain, emu_stcs, emu_misaligned);
    return used;
}
extern "C" long emu_registry_size(void) {
    init_registry();
    return (long)registry.size();
}

/* fastdiv: the multiply-shift against plain division */
extern "C" long emu_fastdiv_selftest(long *checked) {
    long bad = 0, n_checked = 0;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    auto rnd = [&]() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    };
    auto test = [&](uint64_t d, uint64_t n) {
        fastdiv f = make_fastdiv(d, 0xffffffffull);
        if (!f.small) {
            bad++;
            return;
        }
        uint64_t q = fastdiv_div(f, n);
        n_checked++;
        if (q != n / d) {
            if (bad < 10)
                fprintf(stderr, "fastdiv d=%llu n=%llu got %llu want %llu\n", (unsigned long long)d,
                        (unsigned long long)n, (unsigned long long)q, (unsigned long long)(n / d));
            bad++;
        }
    };
    std::vector<uint64_t> ds;
    for (uint64_t d = 1; d <= 5000; d++) ds.push_back(d);
    for (int k = 1; k < 31; k++)
        for (int e = -3; e <= 3; e++) {
            int64_t d = (int64_t(1) << k) + e;
            if (d >= 1 && d < 0x80000000ll) ds.push_back(d);
        }
    ds.push_back(0x7fffffff);
    ds.push_back(0x7ffffffe);
    ds.push_back(0x40000001);
    ds.push_back(3u * 0x2aaaaaab / 3);
    for (int i = 0; i < 20000; i++) ds.push_back(1 + rnd() % 0x7fffffffull);
    for (int i = 0; i < 2000; i++) ds.push_back(1 + rnd() % (1 + (rnd() % 100000)));
    for (uint64_t d : ds) {
        uint64_t edge[] = {0,
                           1,
                           d - 1,
                           d,
                           d + 1,
                           2 * d - 1,
                           2 * d,
                           0xffffffffull,
                           0xfffffffeull,
                           0x80000000ull,
                           0x7fffffffull};
        for (uint64_t n : edge)
            if (n <= 0xffffffffull) test(d, n);
        uint64_t qmax = 0xffffffffull / d; /* multiples and their neighbours near the top */
        for (uint64_t q : {qmax, qmax - 1, qmax / 2, (uint64_t)1})
            for (int64_t e = -1; e <= 1; e++) {
                uint64_t n = q * d + e;
                if (q * d >= 1 && n <= 0xffffffffull) test(d, n);
            }
        for (int i = 0; i < 200; i++) test(d, rnd() & 0xffffffffull);
    }
    /* exhaustive n for a few divisors (every n < 2^32) */
    if (getenv("EMU_FASTDIV_EXHAUSTIVE")) {
        for (uint64_t d : {3ull, 7ull, 641ull, 0x7fffffffull, 12345ull, 704ull, 428ull, 1408ull}) {
            fastdiv f = make_fastdiv(d, 0xffffffffull);
            for (uint64_t n = 0; n <= 0xffffffffull; n++) {
                n_checked++;
                if (fastdiv_div(f, n) != n / d) {
                    bad++;
                    break;
                }
            }
        }
    }
    /* the 64-bit fallback: make_fastdiv picks it when n_max > 2^32-1 or d >= 2^31 */
    for (int i = 0; i < 200000; i++) {
        uint64_t d = 1 + (rnd() >> (rnd() % 64)), n = rnd() >> (rnd() % 64);
        if (d == 0) d = 1;
        fastdiv f = make_fastdiv(d, 0x100000000ull + (rnd() % 1000));
        n_checked++;
        if (f.small || fastdiv_div(f, n) != n / d) bad++;
        fastdiv g = make_fastdiv(0x80000000ull + (rnd() % 0x80000000ull), 100);
        n_checked++;
        if (g.small || fastdiv_div(g, n) != n / g.d) bad++;
    }
    *checked = n_checked;
    return bad;
}
