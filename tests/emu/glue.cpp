/* tests/emu/glue.cpp — see CMakeLists.txt (test_cuda_emulation) and tests/emu/harness.cpp. */
/* Host emulation glue: compiles the family's plain-SwiGLU kernels (src/glu_swiglu.cuh) as host C++,
 * routes fastglu_glu_*_cuda's plain-SwiGLU case to them as glu_cuda.cu does (the swiglu wrappers of
 * src/swiglu.c call it), and emulates cudaLaunchKernel through a registry from kernel pointer to an
 * arg-unpacking invoker. */
#include <utility>
#include <type_traits>
#include <vector>
#include <string>
#include <algorithm>
#include <typeinfo>
#ifdef EMU_CAP_BLOCKS
extern long long emu_max_blocks;
#define MAX_BLOCKS emu_max_blocks
#endif
static int64_t debug_max_blocks = 0; /* glu_swiglu.cuh's grid cap beside MAX_BLOCKS */
#include "glu_swiglu.cuh"

dim3 blockIdx, threadIdx, gridDim, blockDim;
long emu_misaligned, emu_ldg, emu_ldcs, emu_stcs, emu_ldplain;
long long emu_max_blocks = 2147483647LL;
extern "C" {
int emu_order = 0; /* 0 forward, 1 reverse, 2 shuffled */
long emu_bad_launch = 0, emu_launches = 0, emu_multi_iter = 0;
}

typedef void (*invoker)(const void *, void **);
struct entry {
    const void *f;
    invoker inv;
    std::string name;
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
template <typename... A> static void reg(void (*f)(A...), std::string name) {
    registry.push_back({(const void *)f, &call<A...>, name, 0});
}
static const char *tn(float *) { return "f32"; }
static const char *tn(__half *) { return "f16"; }
static const char *tn(__nv_bfloat16 *) { return "bf16"; }
template <typename T, int LP, int SP> static void reg_fwd() {
    reg(swiglu_fwd_kernel<T, LP, SP>, std::string("fwd<") + tn((T *)0) + ",LP" +
                                          std::to_string(LP) + ",SP" + std::to_string(SP) + ">");
    reg(swiglu_fwd_aligned_kernel<T, LP, SP>, std::string("fwdaligned<") + tn((T *)0) + ",LP" +
                                                  std::to_string(LP) + ",SP" + std::to_string(SP) +
                                                  ">");
    reg(swiglu_fwd_flat_kernel<T, LP, SP>, std::string("fwdflat<") + tn((T *)0) + ",LP" +
                                               std::to_string(LP) + ",SP" + std::to_string(SP) +
                                               ">");
}
template <typename T, int DY, int LP, int SP> static void reg_bwd() {
    reg(swiglu_bwd_kernel<T, DY, LP, SP>, std::string("bwd<") + tn((T *)0) + ",DY" +
                                              std::to_string(DY) + ",LP" + std::to_string(LP) +
                                              ",SP" + std::to_string(SP) + ">");
}
template <typename T, int LP, int SP> static void reg_all3() {
    reg_fwd<T, LP, SP>();
    reg_bwd<T, DY_CHUNK, LP, SP>();
    reg_bwd<T, DY_SCALAR, LP, SP>();
    reg_bwd<T, DY_STRIDED, LP, SP>();
}
template <typename T> static void reg_type() {
    reg_all3<T, LOAD_NC, STORE_PLAIN>();
    reg_all3<T, LOAD_PLAIN, STORE_PLAIN>();
    reg_all3<T, LOAD_STREAM, STORE_PLAIN>();
    reg_all3<T, LOAD_NC, STORE_STREAM>();
    reg_all3<T, LOAD_PLAIN, STORE_STREAM>();
    reg_all3<T, LOAD_STREAM, STORE_STREAM>();
}
static void init_registry() {
    if (!registry.empty()) return;
    reg_type<float>();
    reg_type<__half>();
    reg_type<__nv_bfloat16>();
}

static uint64_t shuf_state = 0x243F6A8885A308D3ull;
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
    if (grid.x < 1 || grid.x > 2147483647u || grid.y != 1 || grid.z != 1 || block.x < 1 ||
        block.x > SWIGLU_MAX_THREADS || block.y != 1 || block.z != 1 || smem != 0) {
        emu_bad_launch++;
        fprintf(stderr, "EMU: bad launch %s grid %u block %u smem %zu\n", e->name.c_str(), grid.x,
                block.x, smem);
        return cudaErrorInvalidValue;
    }
    e->hits++;
    emu_launches++;
    { /* grid-stride accounting: chunks is argument 6 of the aligned forward, 7 of the others, 12
       * of the backward */
        const bool aligned = e->name.compare(0, 10, "fwdaligned") == 0;
        uint64_t chunks = aligned ? *(unsigned *)args[6] /* 32-bit there */
                                  : *(uint64_t *)args[e->name[0] == 'f' ? 7 : 12];
        if (aligned && (uint64_t)grid.x * block.x < chunks) {
            emu_bad_launch++; /* the aligned kernel has no grid-stride loop: a thread per chunk */
            fprintf(stderr, "EMU: %s launched with fewer threads than chunks\n", e->name.c_str());
        }
        if ((uint64_t)grid.x * block.x < chunks) emu_multi_iter++;
    }
    gridDim = grid;
    blockDim = block;
    uint64_t n = (uint64_t)grid.x * block.x;
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
    for (uint64_t k : order) {
        blockIdx = dim3((unsigned)(k / block.x));
        threadIdx = dim3((unsigned)(k % block.x));
        e->inv(func, args);
    }
    return cudaSuccess;
}

extern "C" void emu_report(void) {
    init_registry();
    long used = 0;
    for (auto &r : registry)
        if (r.hits) used++;
    printf("kernels hit %ld/%zu:", used, registry.size());
    for (auto &r : registry)
        if (r.hits) printf(" %s=%ld", r.name.c_str(), r.hits);
    printf("\nlaunches %ld bad %ld grid-stride(multi-iteration) launches %ld; ldg %ld ldcs %ld "
           "ldplain %ld stcs %ld misaligned %ld\n",
           emu_launches, emu_bad_launch, emu_multi_iter, emu_ldg, emu_ldcs, emu_ldplain, emu_stcs,
           emu_misaligned);
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

/* fastglu_glu_*_cuda as glu_cuda.cu has them for the case glu_swiglu.cuh takes (the only one the
 * emulation runs: any other case is an error here). */
static fastglu_status fwd_entry(const fastglu_glu_params *params, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                const void *bias, const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *output, int64_t output_row_stride,
                                void *saved_fp8, int64_t saved_fp8_row_stride, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_fwd_cuda";
    int empty;
    fastglu_status st =
        fastglu_check_glu_fwd(fn, params, gate, gate_row_stride, up, up_row_stride, bias, weights,
                              weights_dtype, weights_stride, output, output_row_stride, saved_fp8,
                              saved_fp8_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    if (!swiglu_fwd_case(params, bias, weights, saved_fp8))
        return fastglu_set_error(FASTGLU_ERROR_CUDA, "%s: not emulated", fn);
    launch_plan p;
    if (!plan_launch(tokens, ffn_hidden_size, fastglu_dtype_size(dtype), FASTGLU_THREADS, &p))
        return too_large(fn);
    return launch_status(fn, LAUNCH_FOR_DTYPE(dtype, launch_fwd, &p, (cudaStream_t)stream, gate,
                                              gate_row_stride, up, up_row_stride, output,
                                              output_row_stride, tokens, ffn_hidden_size));
}

static fastglu_status bwd_entry(const fastglu_glu_params *params, const void *dy,
                                int64_t dy_row_stride, int64_t dy_col_stride, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                fastglu_dtype input_dtype, const float *input_scale_inv,
                                int64_t input_scale_stride, int input_scale_1x128, const void *bias,
                                const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *d_gate, int64_t d_gate_row_stride,
                                void *d_up, int64_t d_up_row_stride, void *dbias, void *dweights,
                                void *workspace, size_t workspace_bytes, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_bwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_bwd(
        fn, params, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up, up_row_stride,
        input_dtype, input_scale_inv, input_scale_stride, input_scale_1x128, bias, weights,
        weights_dtype, weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride, dbias,
        dweights, workspace, workspace_bytes, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    if (!swiglu_bwd_case(params, input_dtype, dtype, bias, weights, dbias, dweights))
        return fastglu_set_error(FASTGLU_ERROR_CUDA, "%s: not emulated", fn);
    launch_plan p;
    if (!plan_launch(tokens, ffn_hidden_size, fastglu_dtype_size(dtype), FASTGLU_THREADS, &p))
        return too_large(fn);
    return launch_status(fn, LAUNCH_FOR_DTYPE(dtype, launch_bwd, &p, (cudaStream_t)stream, dy,
                                              dy_row_stride, dy_col_stride, gate, gate_row_stride,
                                              up, up_row_stride, d_gate, d_gate_row_stride, d_up,
                                              d_up_row_stride, tokens, ffn_hidden_size));
}

extern "C" fastglu_status fastglu_glu_fwd_cuda(FASTGLU_GLU_FWD_ARGS, void *stream) {
    const fastglu_status st =
        fastglu_check_glu_fwd_descriptors("fastglu_glu_fwd_cuda", operands, &output, &saved_fp8);
    if (st != FASTGLU_SUCCESS) return st;
    return fwd_entry(params,
                     FASTGLU_GLU_FWD_FIELDS(operands, output, saved_fp8, tokens, ffn_hidden_size),
                     stream);
}

extern "C" fastglu_status fastglu_glu_bwd_cuda(FASTGLU_GLU_BWD_ARGS, void *stream) {
    const fastglu_status st =
        fastglu_check_glu_bwd_descriptors("fastglu_glu_bwd_cuda", &dy, operands, grads);
    if (st != FASTGLU_SUCCESS) return st;
    return bwd_entry(params,
                     FASTGLU_GLU_BWD_FIELDS(dy, dy_col_stride, operands, grads, workspace, tokens,
                                            ffn_hidden_size),
                     stream);
}
