/*
 * fastglu_bench.c — fastglu-bench: times libfastglu's CUDA kernels through the C API, so that C
 * users can measure them without Python. C11, built against cuda_runtime_api.h and libfastglu.
 *
 * Problem (that of the Python harness, python/fastglu/bench/swiglu.py): T = S * B tokens,
 *   x  [T, 2F]  gate = x[:, 0:F], up = x[:, F:2F] (Megatron's fc1 output; --interleaved: gate at
 *               even columns, up at odd ones), row stride 2F
 *   y  [T, F]   the output, row stride F;   dy [T, F] the upstream gradient;   dx [T, 2F] dgrad
 * Defaults: S = 2048, B = 4, F = 8192, bf16 (the seed record's shape).
 *
 * Entry points: plain SwiGLU calls fastglu_swiglu_fwd_cuda / fastglu_swiglu_bwd_cuda; any variant
 * flag (--activation other than silu, --bias, --weights, --clamp, --interleaved, --fp8-store, or
 * --glu) calls fastglu_glu_fwd_cuda / fastglu_glu_bwd_cuda, whose backward then also reduces dbias
 * (with --bias) and dweights (with --weights) through a workspace. --fp8-store is Megatron's
 * fp8_input_store done by the forward itself: it also writes x8 [T, 2F] float8_e4m3fn (saved_fp8,
 * the operands' layout, row stride 2F) in the same pass, and every backward reads x8 as its input
 * (input_dtype FASTGLU_DTYPE_FP8_E4M3, gate = x8, up = x8 + F) instead of x. A build of libfastglu
 * without the fastglu_glu_* family (see CMakeLists.txt: FASTGLU_BENCH_GLU) refuses the variant
 * flags.
 *
 * Modes, per timed iteration (the Python harness's names):
 *   forward   y = f(x)
 *   backward  y = f(x), then the backward with a broadcast dy: one element read with row and
 *             column strides 0, which is what y.sum().backward() hands the backward. The Python
 *             harness's (and the seed's) "backward" also runs the sum kernel, which reads y; this
 *             program has no kernels of its own, so its backward moves 7TF elements, not 8TF, and
 *             its times are not comparable with the Python "backward" rows.
 *   full      y = f(x), then the backward with a full random dy [T, F]
 *   bwd_only  the backward alone with the full dy (it reads x, not y: no forward needed)
 *
 * Bytes (the floor of python/fastglu/bench/records.py FLOOR_ELEMS and bench/PERF_NOTES.md, in
 * elements of T*F, e bytes each): forward 3TF (read x 2TF, write y TF); backward with a full dy 5TF
 * (read dy TF and x 2TF, write dx 2TF), with a broadcast dy 4TF + 1; so backward 7TF, full 8TF,
 * bwd_only 5TF. Variants add what they must move at least: the bias (2F) read by each pass and dbias
 * (2F) written; the weights (T, of the weights' dtype) read by each pass and dweights (T) written;
 * the workspace's traffic is not counted (it is the kernel's choice, not the problem's). With
 * --fp8-store the forward also writes x8 (2TF bytes) and a backward reads x8 (2TF bytes) in place
 * of x (2TF elements): forward 3TF e + 2TF, backward with a full dy 3TF e + 2TF.
 * floor = bytes / B_copy, B_copy = a device-to-device cudaMemcpyAsync of 1 GiB in the same run,
 * bytes read + written (2 GiB) over its median time. ratio = median / floor.
 *
 * Timing (the schedule of triton.testing.do_bench, which the Python harness uses with rep = 100 and
 * quantiles 0.5/0.2/0.8): one call; an estimate over 5 calls, each after an L2 flush; then
 * max(1, warmup / estimate) untimed calls and max(1, rep / estimate) timed ones, each preceded by
 * a flush of the L2 (cudaMemsetAsync of a 256 MiB buffer, outside the events) and bracketed by two
 * CUDA events on the benchmark's stream; median and the 0.2 / 0.8 quantiles (linear
 * interpolation, as torch.quantile) in ms.
 *
 * Check: before timing, for every F, one forward and two backwards (full dy, broadcast dy) into
 * outputs pre-filled with NaN are compared with a float64 reference of the header's formulas
 * (include/fastglu.h) on rows 0, T/2 and T-1 (y, d_gate, d_up, dweights) and, over all T rows,
 * on columns 0, F/3, 2F/3, F-1 of dbias (with --fp8-store the backward's reference operands are the
 * decoded fp8 values, and x8's sampled rows must equal the e4m3fn cast of x byte for byte);
 * relative norm error <= 1e-2 (bf16), 1e-3 (fp16),
 * 1e-5 (fp32), of dtype (dweights: of weights_dtype). Inputs: a fixed-seed SplitMix64 stream on the host, uploaded once for the largest F
 * (gate/up uniform in [-3, 3), dy in [-1, 1), bias in [-0.5, 0.5), weights in [0, 1)).
 *
 * Exit status: 0 success; 1 a CUDA or fastglu error (at once, with the message), or a failed check
 * (after the whole table and the JSON); 2 bad options; 77 no CUDA device (CTest: skipped).
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "fastglu.h"

#include "convert.h" /* bf16 / fp16 <-> fp32 on the host (src/, shared with the CPU backend) */
#include "fp8.h"     /* fastglu_f32_to_e4m3: the cast saved_fp8 holds (src/, checked by CTest) */

#ifndef FASTGLU_BENCH_HAVE_GLU
#define FASTGLU_BENCH_HAVE_GLU 0 /* 1: libfastglu defines the fastglu_glu_* family */
#endif

enum { EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_NO_DEVICE = 77 };
enum { MAX_FFN = 64 };

static const size_t FLUSH_BYTES = (size_t)256 << 20; /* do_bench's 256 MB cache-clearing buffer */
static const size_t COPY_BYTES = (size_t)1 << 30;    /* the Python harness's 1 GiB copy */
static const long MAX_REPS = 1L << 22;               /* bounds the event arrays */

typedef enum mode { MODE_FORWARD, MODE_BACKWARD, MODE_FULL, MODE_BWD_ONLY, MODE_COUNT } mode;
static const char *const mode_names[MODE_COUNT] = {"forward", "backward", "full", "bwd_only"};

static const char *const activation_names[] = {"silu", "gelu_tanh", "quick_gelu"};

/* ---- errors ---------------------------------------------------------------------------------- */

static void die(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fastglu-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

#define CUDA_CHECK(call) cuda_check((call), #call, __LINE__)
static void cuda_check(cudaError_t err, const char *what, int line) {
    if (err != cudaSuccess)
        die(EXIT_ERROR, "line %d: %s: %s (%s)", line, what, cudaGetErrorString(err),
            cudaGetErrorName(err));
}

static void fastglu_check(fastglu_status st) {
    if (st != FASTGLU_SUCCESS)
        die(EXIT_ERROR, "%s: %s", fastglu_strerror(st), fastglu_last_error_message());
}

/* ---- options ----------------------------------------------------------------------------------- */

typedef struct options {
    mode modes[MODE_COUNT];
    int n_modes;
    int64_t seq, batch;
    int64_t ffn[MAX_FFN];
    int n_ffn;
    fastglu_dtype dtype;
    fastglu_activation activation;
    int bias;
    int weights; /* with per-token weights (MoE probs) of weights_dtype */
    fastglu_dtype weights_dtype;
    int clamp_given;
    float clamp_value;
    int interleaved;
    int fp8_store; /* the forward writes the fp8 copy; the backward reads it */
    int force_glu;
    double warmup_ms, rep_ms;
    const char *json_path;
} options;

static void usage(FILE *f) {
    fputs(
        "usage: fastglu-bench [options]\n"
        "\n"
        "Times libfastglu's CUDA kernels through the C API: a gated activation over x [T, 2F]\n"
        "(T = S*B tokens, gate | up on the last dimension) into y [T, F], and its backward.\n"
        "\n"
        "  --mode M[,M...]      forward, backward, full, bwd_only or all (default all)\n"
        "                         forward   y = f(x)\n"
        "                         backward  forward + backward with a broadcast dy (strides 0, "
        "what\n"
        "                                   y.sum().backward() passes; no sum kernel: 7TF "
        "elements,\n"
        "                                   where the Python harness's backward moves 8TF)\n"
        "                         full      forward + backward with a full random dy [T, F]\n"
        "                         bwd_only  the backward alone with the full dy\n"
        "  --seq S              sequence length (default 2048)\n"
        "  --batch B            micro-batch size (default 4)\n"
        "  --ffn F[,F...]       ffn_hidden_size, one or more (default 8192)\n"
        "  --dtype D            bf16, fp16 or fp32 (default bf16)\n"
        "  --activation A       silu, gelu_tanh or quick_gelu (default silu)\n"
        "  --bias               add a [2F] bias (the backward also reduces dbias)\n"
        "  --weights W          per-token weights (MoE probs) of dtype fp32 or bf16 (the backward\n"
        "                       also reduces dweights)\n"
        "  --clamp C            clamp_value: gate clamped above at C, up to [-C, C] (C <= 0: "
        "none)\n"
        "  --interleaved        gate and up interleaved on the last dimension (GPT-OSS layout)\n"
        "  --fp8-store          Megatron's fp8_input_store in the kernel: the forward also writes "
        "the\n"
        "                       float8_e4m3fn copy of x [T, 2F] (saved_fp8), the backward reads "
        "it\n"
        "  --glu                call fastglu_glu_fwd_cuda / fastglu_glu_bwd_cuda even for plain "
        "SwiGLU\n"
        "                       (any variant flag above implies it; without one, plain SwiGLU "
        "calls\n"
        "                       fastglu_swiglu_fwd_cuda / fastglu_swiglu_bwd_cuda)\n"
        "  --warmup-ms MS       warm-up time, as do_bench's warmup (default 25)\n"
        "  --rep-ms MS          timed repetitions' total, as do_bench's rep (default 100)\n"
        "  --json PATH          also write the results as JSON to PATH\n"
        "  -h, --help           print this help and exit\n"
        "\n"
        "Each timed call is preceded by an L2 flush (a 256 MiB cudaMemsetAsync) and bracketed by "
        "CUDA\n"
        "events; the median and the 0.2/0.8 quantiles are reported in ms, with the bytes the mode "
        "must\n"
        "move, GB/s, and the floor: bytes over the device-to-device copy bandwidth measured in the "
        "same\n"
        "run (a 1 GiB cudaMemcpyAsync, bytes read + written). Outputs are checked against a "
        "float64\n"
        "reference before timing.\n"
        "\n"
        "Exit status: 0 success; 1 CUDA/fastglu error or failed check; 2 bad options; 77 no CUDA "
        "device.\n",
        f);
}

static void bad_option(const char *opt, const char *arg, const char *why) {
    fprintf(stderr, "fastglu-bench: %s %s: %s (see --help)\n", opt, arg, why);
    exit(EXIT_USAGE);
}

static int64_t parse_positive(const char *opt, const char *text) {
    char *end = NULL;
    long long v;
    if (*text < '0' || *text > '9') bad_option(opt, text, "not a positive integer");
    v = strtoll(text, &end, 10);
    if (*end != '\0' || v < 1) bad_option(opt, text, "not a positive integer");
    if (v > ((long long)1 << 31)) bad_option(opt, text, "larger than 2^31");
    return (int64_t)v;
}

static double parse_ms(const char *opt, const char *text) {
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0.0) || !(v <= 1e7))
        bad_option(opt, text, "not a positive number of milliseconds");
    return v;
}

static fastglu_dtype parse_dtype(const char *opt, const char *text, int allow_fp16) {
    if (strcmp(text, "bf16") == 0) return FASTGLU_DTYPE_BF16;
    if (strcmp(text, "fp32") == 0) return FASTGLU_DTYPE_FP32;
    if (allow_fp16 && strcmp(text, "fp16") == 0) return FASTGLU_DTYPE_FP16;
    bad_option(opt, text, allow_fp16 ? "expected bf16, fp16 or fp32" : "expected fp32 or bf16");
    return FASTGLU_DTYPE_FP32;
}

static void add_mode(options *o, mode m) {
    for (int i = 0; i < o->n_modes; ++i)
        if (o->modes[i] == m) return; /* a mode named twice runs once */
    o->modes[o->n_modes++] = m;
}

static void parse_modes(options *o, const char *text) {
    char buf[256];
    if (strlen(text) >= sizeof buf) bad_option("--mode", text, "too long");
    strcpy(buf, text);
    o->n_modes = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        if (strcmp(tok, "all") == 0) {
            for (int m = 0; m < MODE_COUNT; ++m) add_mode(o, (mode)m);
            continue;
        }
        for (int m = 0; m < MODE_COUNT; ++m)
            if (strcmp(tok, mode_names[m]) == 0) {
                add_mode(o, (mode)m);
                found = 1;
            }
        if (!found) bad_option("--mode", tok, "expected forward, backward, full, bwd_only or all");
    }
    if (o->n_modes == 0) bad_option("--mode", text, "no mode named");
}

static void parse_ffn(options *o, const char *text) {
    char buf[1024];
    if (strlen(text) >= sizeof buf) bad_option("--ffn", text, "too long");
    strcpy(buf, text);
    o->n_ffn = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        const int64_t f = parse_positive("--ffn", tok);
        int dup = 0;
        for (int i = 0; i < o->n_ffn; ++i) dup |= o->ffn[i] == f; /* duplicates run once */
        if (dup) continue;
        if (o->n_ffn == MAX_FFN) bad_option("--ffn", text, "more than 64 widths");
        o->ffn[o->n_ffn++] = f;
    }
    if (o->n_ffn == 0) bad_option("--ffn", text, "no width given");
}

static int uses_glu(const options *o) {
    return o->force_glu || o->activation != FASTGLU_ACT_SILU || o->bias || o->weights ||
           o->clamp_given || o->interleaved || o->fp8_store;
}

static void parse_options(int argc, char **argv, options *o) {
    enum {
        OPT_MODE = 256,
        OPT_SEQ,
        OPT_BATCH,
        OPT_FFN,
        OPT_DTYPE,
        OPT_ACT,
        OPT_BIAS,
        OPT_WEIGHTS,
        OPT_CLAMP,
        OPT_INTERLEAVED,
        OPT_FP8_STORE,
        OPT_GLU,
        OPT_WARMUP,
        OPT_REP,
        OPT_JSON
    };
    static const struct option longopts[] = {{"mode", required_argument, NULL, OPT_MODE},
                                             {"seq", required_argument, NULL, OPT_SEQ},
                                             {"batch", required_argument, NULL, OPT_BATCH},
                                             {"ffn", required_argument, NULL, OPT_FFN},
                                             {"dtype", required_argument, NULL, OPT_DTYPE},
                                             {"activation", required_argument, NULL, OPT_ACT},
                                             {"bias", no_argument, NULL, OPT_BIAS},
                                             {"weights", required_argument, NULL, OPT_WEIGHTS},
                                             {"clamp", required_argument, NULL, OPT_CLAMP},
                                             {"interleaved", no_argument, NULL, OPT_INTERLEAVED},
                                             {"fp8-store", no_argument, NULL, OPT_FP8_STORE},
                                             {"glu", no_argument, NULL, OPT_GLU},
                                             {"warmup-ms", required_argument, NULL, OPT_WARMUP},
                                             {"rep-ms", required_argument, NULL, OPT_REP},
                                             {"json", required_argument, NULL, OPT_JSON},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;
    memset(o, 0, sizeof *o);
    parse_modes(o, "all");
    o->seq = 2048;
    o->batch = 4;
    o->ffn[0] = 8192;
    o->n_ffn = 1;
    o->dtype = FASTGLU_DTYPE_BF16;
    o->activation = FASTGLU_ACT_SILU;
    o->weights_dtype = FASTGLU_DTYPE_FP32;
    o->warmup_ms = 25.0;
    o->rep_ms = 100.0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); exit(0);
        case OPT_MODE: parse_modes(o, optarg); break;
        case OPT_SEQ: o->seq = parse_positive("--seq", optarg); break;
        case OPT_BATCH: o->batch = parse_positive("--batch", optarg); break;
        case OPT_FFN: parse_ffn(o, optarg); break;
        case OPT_DTYPE: o->dtype = parse_dtype("--dtype", optarg, 1); break;
        case OPT_ACT: {
            int found = 0;
            for (int a = 0; a < 3; ++a)
                if (strcmp(optarg, activation_names[a]) == 0) {
                    o->activation = (fastglu_activation)a;
                    found = 1;
                }
            if (!found)
                bad_option("--activation", optarg, "expected silu, gelu_tanh or quick_gelu");
            break;
        }
        case OPT_BIAS: o->bias = 1; break;
        case OPT_WEIGHTS:
            o->weights = 1;
            o->weights_dtype = parse_dtype("--weights", optarg, 0);
            break;
        case OPT_CLAMP: {
            char *end = NULL;
            o->clamp_value = strtof(optarg, &end);
            if (end == optarg || *end != '\0' || !isfinite(o->clamp_value))
                bad_option("--clamp", optarg, "not a finite number");
            o->clamp_given = 1;
            break;
        }
        case OPT_INTERLEAVED: o->interleaved = 1; break;
        case OPT_FP8_STORE: o->fp8_store = 1; break;
        case OPT_GLU: o->force_glu = 1; break;
        case OPT_WARMUP: o->warmup_ms = parse_ms("--warmup-ms", optarg); break;
        case OPT_REP: o->rep_ms = parse_ms("--rep-ms", optarg); break;
        case OPT_JSON: o->json_path = optarg; break;
        default: fputs("fastglu-bench: see --help\n", stderr); exit(EXIT_USAGE);
        }
    }
    if (optind < argc) bad_option("argument", argv[optind], "unexpected");
    if (o->seq * o->batch > ((int64_t)1 << 31))
        bad_option("--seq x --batch", "", "more than 2^31 tokens");
    if (uses_glu(o) && !FASTGLU_BENCH_HAVE_GLU) {
        fputs("fastglu-bench: the variant flags (--activation other than silu, --bias, --weights,\n"
              "--clamp, --interleaved, --fp8-store, --glu) call fastglu_glu_fwd_cuda / "
              "fastglu_glu_bwd_cuda, which\n"
              "this build did not find in libfastglu (configure with -DFASTGLU_BENCH_GLU=ON to "
              "force)\n",
              stderr);
        exit(EXIT_USAGE);
    }
}

/* ---- host data --------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x5eedf00dcafe1234ull;

/* SplitMix64 (Steele, Lea, Flood 2014): a uniform double in [lo, hi). */
static double uniform(double lo, double hi) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static void store_elem(void *buf, fastglu_dtype dt, size_t i, float v) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: ((float *)buf)[i] = v; break;
    case FASTGLU_DTYPE_FP16: ((uint16_t *)buf)[i] = f32_to_fp16(v); break;
    default: ((uint16_t *)buf)[i] = f32_to_bf16(v); break;
    }
}

static double load_elem(const void *buf, fastglu_dtype dt, size_t i) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return ((const float *)buf)[i];
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(((const uint16_t *)buf)[i]);
    default: return bf16_to_f32(((const uint16_t *)buf)[i]);
    }
}

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die(EXIT_ERROR, "out of host memory (%zu bytes)", bytes);
    return p;
}

/* n random elements in [lo, hi) of dtype dt, on the host. */
static void *host_random(fastglu_dtype dt, size_t n, double lo, double hi) {
    void *p = host_alloc(n * fastglu_dtype_size(dt));
    for (size_t i = 0; i < n; ++i) store_elem(p, dt, i, (float)uniform(lo, hi));
    return p;
}

static void *device_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void *device_copy_of(const void *host, size_t bytes) {
    void *p = device_alloc(bytes);
    CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    return p;
}

static void *offset(const void *p, size_t bytes) { return (char *)(uintptr_t)p + bytes; }

/* ---- the problem and its launches ---------------------------------------------------------------- */

typedef struct problem {
    int use_glu;
    fastglu_glu_params
        params; /* what the reference computes (plain SwiGLU: silu, split, no clamp) */
    fastglu_dtype dtype, weights_dtype;
    size_t esize, wsize;
    int64_t T, F;
    void *x, *y, *dy, *dx;                   /* device, sized for the largest F */
    void *x8;                                /* device [T, 2F] fp8 copy (--fp8-store), or NULL */
    void *bias, *dbias, *weights, *dweights; /* device; NULL when not used */
    void *workspace;                         /* device; NULL when none is needed */
    size_t workspace_bytes;
    cudaStream_t stream;
} problem;

#if FASTGLU_BENCH_HAVE_GLU
/* A fastglu_tensor of (data, dtype, row stride). */
static fastglu_tensor tensor(const void *data, fastglu_dtype dtype, int64_t row_stride) {
    fastglu_tensor t;
    t.data = (void *)(uintptr_t)data, t.dtype = dtype, t.row_stride = row_stride;
    return t;
}
#endif

static void run_fwd(const problem *p) {
    const int64_t F = p->F;
    if (!p->use_glu) {
        fastglu_check(fastglu_swiglu_fwd_cuda(p->x, 2 * F, p->y, F, p->T, F, p->dtype, p->stream));
        return;
    }
#if FASTGLU_BENCH_HAVE_GLU
    {
        const void *up =
            p->params.layout == FASTGLU_LAYOUT_SPLIT ? offset(p->x, F * p->esize) : NULL;
        const fastglu_glu_operands o = {
            tensor(p->x, p->dtype, 2 * F),       tensor(up, p->dtype, 2 * F),
            tensor(p->bias, p->dtype, 1),        tensor(p->weights, p->weights_dtype, 1),
            tensor(NULL, FASTGLU_DTYPE_FP32, 0), 0};
        fastglu_check(fastglu_glu_fwd_cuda(&p->params, &o, tensor(p->y, p->dtype, F),
                                           tensor(p->x8, FASTGLU_DTYPE_FP8_E4M3, 2 * F), p->T, F,
                                           p->stream));
    }
#else
    die(EXIT_ERROR, "internal error: the fastglu_glu_* family is not built in");
#endif
}

/* The backward with dy read at strides (dy_row_stride, dy_col_stride): (F, 1) full, (0, 0) broadcast. */
static void run_bwd(const problem *p, int64_t dy_row_stride, int64_t dy_col_stride) {
    const int64_t F = p->F;
    if (!p->use_glu) {
        fastglu_check(fastglu_swiglu_bwd_cuda(p->dy, dy_row_stride, dy_col_stride, p->x, 2 * F,
                                              p->dx, 2 * F, p->T, F, p->dtype, p->stream));
        return;
    }
#if FASTGLU_BENCH_HAVE_GLU
    {
        const int split = p->params.layout == FASTGLU_LAYOUT_SPLIT;
        /* the input: x, or (--fp8-store) the forward's fp8 copy x8, whose row stride is also 2F */
        const void *in = p->x8 ? p->x8 : p->x;
        const size_t in_es = p->x8 ? 1 : p->esize;
        const fastglu_dtype in_dt = p->x8 ? FASTGLU_DTYPE_FP8_E4M3 : p->dtype;
        const void *up = split ? offset(in, F * in_es) : NULL;
        void *d_up = split ? offset(p->dx, F * p->esize) : NULL;
        const fastglu_glu_operands o = {tensor(in, in_dt, 2 * F),
                                        tensor(up, in_dt, 2 * F),
                                        tensor(p->bias, p->dtype, 1),
                                        tensor(p->weights, p->weights_dtype, 1),
                                        tensor(NULL, FASTGLU_DTYPE_FP32, 0),
                                        0};
        const fastglu_glu_grads g = {tensor(p->dx, p->dtype, 2 * F), tensor(d_up, p->dtype, 2 * F),
                                     tensor(p->dbias, p->dtype, 1),
                                     tensor(p->dweights, p->weights_dtype, 1)};
        const fastglu_workspace ws = {p->workspace, p->workspace_bytes};
        fastglu_check(fastglu_glu_bwd_cuda(&p->params, tensor(p->dy, p->dtype, dy_row_stride),
                                           dy_col_stride, &o, &g, ws, p->T, F, p->stream));
    }
#else
    (void)dy_row_stride;
    (void)dy_col_stride;
    die(EXIT_ERROR, "internal error: the fastglu_glu_* family is not built in");
#endif
}

static void run_mode(const problem *p, mode m) {
    switch (m) {
    case MODE_FORWARD: run_fwd(p); break;
    case MODE_BACKWARD:
        run_fwd(p);
        run_bwd(p, 0, 0);
        break;
    case MODE_FULL:
        run_fwd(p);
        run_bwd(p, p->F, 1);
        break;
    default: run_bwd(p, p->F, 1); break;
    }
}

/* Fewest bytes each mode moves (see the top of the file). */
static double mode_bytes(const problem *p, mode m) {
    const double tf = (double)p->T * (double)p->F, e = (double)p->esize;
    const double extra_pass = (p->bias ? 2.0 * (double)p->F * e : 0.0) +
                              (p->weights ? (double)p->T * (double)p->wsize : 0.0);
    /* --fp8-store: the forward writes x8 (2TF bytes), a backward reads it instead of x */
    const double fwd = 3 * tf * e + extra_pass + (p->x8 ? 2 * tf : 0.0);
    const double x_read = 2 * tf * (p->x8 ? 1.0 : e);
    const double bwd_extra = 2 * extra_pass; /* bias and weights read, dbias and dweights written */
    const double bwd_full = tf * e + x_read + 2 * tf * e + bwd_extra; /* dy, x, dx */
    const double bwd_broadcast = e + x_read + 2 * tf * e + bwd_extra; /* one dy element */
    switch (m) {
    case MODE_FORWARD: return fwd;
    case MODE_BACKWARD: return fwd + bwd_broadcast;
    case MODE_FULL: return fwd + bwd_full;
    default: return bwd_full;
    }
}

/* ---- timing (triton.testing.do_bench's schedule) ----------------------------------------------- */

typedef struct timing {
    double p50, p20, p80; /* ms */
    long reps;
} timing;

typedef struct bench_env {
    cudaStream_t stream;
    void *flush; /* FLUSH_BYTES of device memory */
    double warmup_ms, rep_ms;
} bench_env;

typedef void (*bench_fn)(const void *arg);

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of n sorted values, linear interpolation between the closest ranks (torch.quantile). */
static double quantile(const float *v, long n, double q) {
    const double pos = q * (double)(n - 1);
    const long lo = (long)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

static void flush_l2(const bench_env *env) {
    CUDA_CHECK(cudaMemsetAsync(env->flush, 0, FLUSH_BYTES, env->stream));
}

static timing do_bench(const bench_env *env, bench_fn fn, const void *arg) {
    cudaEvent_t start, stop, *ev;
    float ms, *times;
    double estimate;
    long n_warmup, n_rep;
    timing t;

    fn(arg);
    CUDA_CHECK(cudaStreamSynchronize(env->stream));
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    CUDA_CHECK(cudaEventRecord(start, env->stream));
    for (int i = 0; i < 5; ++i) {
        flush_l2(env);
        fn(arg);
    }
    CUDA_CHECK(cudaEventRecord(stop, env->stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    estimate = ms / 5.0 > 1e-6 ? ms / 5.0 : 1e-6;
    n_warmup = env->warmup_ms / estimate < 1.0 ? 1 : (long)(env->warmup_ms / estimate);
    n_rep = env->rep_ms / estimate < 1.0 ? 1 : (long)(env->rep_ms / estimate);
    if (n_warmup > MAX_REPS) n_warmup = MAX_REPS;
    if (n_rep > MAX_REPS) n_rep = MAX_REPS;

    ev = host_alloc(2 * (size_t)n_rep * sizeof *ev);
    times = host_alloc((size_t)n_rep * sizeof *times);
    for (long i = 0; i < 2 * n_rep; ++i) CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (long i = 0; i < n_warmup; ++i) fn(arg);
    for (long i = 0; i < n_rep; ++i) {
        flush_l2(env);
        CUDA_CHECK(cudaEventRecord(ev[2 * i], env->stream));
        fn(arg);
        CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], env->stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(env->stream));
    for (long i = 0; i < n_rep; ++i) {
        CUDA_CHECK(cudaEventElapsedTime(&times[i], ev[2 * i], ev[2 * i + 1]));
        CUDA_CHECK(cudaEventDestroy(ev[2 * i]));
        CUDA_CHECK(cudaEventDestroy(ev[2 * i + 1]));
    }
    qsort(times, (size_t)n_rep, sizeof *times, cmp_float);
    t.p50 = quantile(times, n_rep, 0.5);
    t.p20 = quantile(times, n_rep, 0.2);
    t.p80 = quantile(times, n_rep, 0.8);
    t.reps = n_rep;
    free(ev);
    free(times);
    return t;
}

typedef struct copy_arg {
    void *dst;
    const void *src;
    size_t bytes;
    cudaStream_t stream;
} copy_arg;

static void run_copy(const void *arg) {
    const copy_arg *c = arg;
    CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->stream));
}

typedef struct mode_arg {
    const problem *p;
    mode m;
} mode_arg;

static void run_mode_fn(const void *arg) {
    const mode_arg *a = arg;
    run_mode(a->p, a->m);
}

/* ---- the check against a float64 reference ----------------------------------------------------- */

typedef struct host_inputs {
    const void *x, *dy, *bias,
        *weights; /* as uploaded: x [T, 2Fmax], dy [T, Fmax], bias [2Fmax], weights [T] */
} host_inputs;

/* float8 e4m3fn byte -> its value (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; S.1111.111
 * is NaN; subnormals m 2^-9). */
static double e4m3_value(uint8_t b) {
    const int e = (b >> 3) & 15, m = b & 7;
    const double v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return (b & 0x80) ? -v : v;
}

/* Element i of x as the backward reads it: x itself, or (--fp8-store) its fp8 copy decoded. */
static double bwd_operand(const problem *p, const void *x, size_t i) {
    const double v = load_elem(x, p->dtype, i);
    return p->x8 ? e4m3_value(fastglu_f32_to_e4m3((float)v, fastglu_fp8_saturate())) : v;
}

/* Column positions of gate/up element j in a row of 2F (also bias and dbias). */
static size_t gate_col(const problem *p, int64_t j) {
    return (size_t)(p->params.layout == FASTGLU_LAYOUT_INTERLEAVED ? 2 * j : j);
}
static size_t up_col(const problem *p, int64_t j) {
    return (size_t)(p->params.layout == FASTGLU_LAYOUT_INTERLEAVED ? 2 * j + 1 : p->F + j);
}

typedef struct ref_point {
    double y, d_gate, d_up, d_a, d_v, dweight; /* dweight: this column's term of dweights[t] */
} ref_point;

/* The formulas of include/fastglu.h (the gated-linear-unit family) in float64. */
static ref_point reference(const fastglu_glu_params *pr, double g, double u, double b_gate,
                           double b_up, double w, double dy) {
    const double c = pr->clamp_value;
    const int clamps = c > 0.0;
    const double gc = clamps && g > c ? c : g;
    const double uc = clamps ? (u > c ? c : u < -c ? -c : u) : u;
    const double a = gc + b_gate, v = uc + b_up + pr->glu_linear_offset;
    const double z = pr->gate_multiplier * a;
    double act, dact;
    ref_point r;
    if (pr->activation == FASTGLU_ACT_GELU_TANH) {
        const double th = tanh(0.79788456 * z * (1.0 + 0.044715 * z * z));
        act = 0.5 * z * (1.0 + th);
        dact = 0.5 * z * (1.0 - th * th) * (0.79788456 + 0.1070322243 * z * z) + 0.5 * (1.0 + th);
    } else {
        const double k = pr->activation == FASTGLU_ACT_QUICK_GELU ? 1.702 : 1.0;
        const double s = 1.0 / (1.0 + exp(-k * z));
        act = z * s;
        dact = s * (1.0 + k * z * (1.0 - s));
    }
    r.y = pr->down_multiplier * w * act * v;
    r.d_a = pr->down_multiplier * w * dy * v * dact * pr->gate_multiplier;
    r.d_v = pr->down_multiplier * w * dy * act;
    r.d_gate = !clamps || g <= c ? r.d_a : 0.0;
    r.d_up = !clamps || (-c <= u && u <= c) ? r.d_v : 0.0;
    r.dweight = pr->down_multiplier * act * v * dy;
    return r;
}

/* Relative norm error ||a - r|| / ||r||, accumulated; a NaN (an unwritten element) makes it NaN. */
typedef struct err_acc {
    double num, den;
} err_acc;
static void err_add(err_acc *e, double a, double r) {
    e->num += (a - r) * (a - r);
    e->den += r * r;
}
static double err_rel(const err_acc *e) {
    if (isnan(e->num)) return NAN;
    return e->den > 0 ? sqrt(e->num / e->den) : (e->num == 0 ? 0.0 : INFINITY);
}

typedef struct check_result {
    double fwd, bwd,
        bwd_broadcast;       /* relative norm errors: y; the worst of d_gate/d_up and dbias */
    long fp8_mismatches;     /* --fp8-store: bytes of x8's sampled rows not the cast of x */
    double dweights;         /* the worse of the two backwards' dweights (0 without weights) */
    double tol, tol_weights; /* the tolerances of dtype and of weights_dtype */
    int passed;              /* every error within its tolerance */
} check_result;

static double tolerance(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_BF16 ? 1e-2 : dt == FASTGLU_DTYPE_FP16 ? 1e-3 : 1e-5;
}

/* The worse of two errors; a NaN (an unwritten output) wins. */
static double worse(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

static void download(void *host, const void *dev, size_t bytes) {
    CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

static void fill_nan(const problem *p) {
    /* all-ones bytes: a NaN in bf16, fp16 and fp32 */
    CUDA_CHECK(cudaMemsetAsync(p->dx, 0xff, (size_t)(p->T * 2 * p->F) * p->esize, p->stream));
    if (p->dbias)
        CUDA_CHECK(cudaMemsetAsync(p->dbias, 0xff, (size_t)(2 * p->F) * p->esize, p->stream));
    if (p->dweights)
        CUDA_CHECK(cudaMemsetAsync(p->dweights, 0xff, (size_t)p->T * p->wsize, p->stream));
}

/* One backward (dy strides (rs, cs)) into NaN-filled outputs, against the reference: returns the
 * worse of the relative errors of d_gate/d_up (sampled rows) and dbias (sampled columns, all rows);
 * *dweights_err: that of dweights (sampled rows), whose dtype is weights_dtype. */
static double check_bwd(const problem *p, const host_inputs *h, const int64_t *rows, int n_rows,
                        const int64_t *cols, int n_cols, int64_t rs, int64_t cs,
                        double *dweights_err) {
    const int64_t F = p->F, F2 = 2 * F;
    void *row = host_alloc((size_t)F2 * p->esize);
    void *dbias = host_alloc((size_t)F2 * p->esize);
    void *dw = host_alloc(p->wsize);
    err_acc edx = {0, 0}, edw = {0, 0}, edb = {0, 0};
    double worst;

    fill_nan(p);
    run_bwd(p, rs, cs);
    CUDA_CHECK(cudaStreamSynchronize(p->stream));
    for (int r = 0; r < n_rows; ++r) {
        const int64_t t = rows[r];
        const double w = p->weights ? load_elem(h->weights, p->weights_dtype, (size_t)t) : 1.0;
        double dw_ref = 0.0;
        download(row, offset(p->dx, (size_t)(t * F2) * p->esize), (size_t)F2 * p->esize);
        for (int64_t j = 0; j < F; ++j) {
            const size_t gi = gate_col(p, j), ui = up_col(p, j), xrow = (size_t)(t * F2);
            const double dy = load_elem(h->dy, p->dtype, (size_t)(t * rs + j * cs));
            const ref_point ref = reference(
                &p->params, bwd_operand(p, h->x, xrow + gi), bwd_operand(p, h->x, xrow + ui),
                p->bias ? load_elem(h->bias, p->dtype, gi) : 0.0,
                p->bias ? load_elem(h->bias, p->dtype, ui) : 0.0, w, dy);
            err_add(&edx, load_elem(row, p->dtype, gi), ref.d_gate);
            err_add(&edx, load_elem(row, p->dtype, ui), ref.d_up);
            dw_ref += ref.dweight;
        }
        if (p->dweights) {
            download(dw, offset(p->dweights, (size_t)t * p->wsize), p->wsize);
            err_add(&edw, load_elem(dw, p->weights_dtype, 0), dw_ref);
        }
    }
    if (p->dbias) {
        download(dbias, p->dbias, (size_t)F2 * p->esize);
        for (int k = 0; k < n_cols; ++k) {
            const int64_t j = cols[k];
            const size_t gi = gate_col(p, j), ui = up_col(p, j);
            double sa = 0.0, sv = 0.0;
            for (int64_t t = 0; t < p->T; ++t) {
                const ref_point ref =
                    reference(&p->params, bwd_operand(p, h->x, (size_t)(t * F2) + gi),
                              bwd_operand(p, h->x, (size_t)(t * F2) + ui),
                              load_elem(h->bias, p->dtype, gi), load_elem(h->bias, p->dtype, ui),
                              p->weights ? load_elem(h->weights, p->weights_dtype, (size_t)t) : 1.0,
                              load_elem(h->dy, p->dtype, (size_t)(t * rs + j * cs)));
                sa += ref.d_a;
                sv += ref.d_v;
            }
            err_add(&edb, load_elem(dbias, p->dtype, gi), sa);
            err_add(&edb, load_elem(dbias, p->dtype, ui), sv);
        }
    }
    worst = p->dbias ? worse(err_rel(&edx), err_rel(&edb)) : err_rel(&edx);
    *dweights_err = p->dweights ? err_rel(&edw) : 0.0;
    free(row);
    free(dbias);
    free(dw);
    return worst;
}

static check_result check_problem(const problem *p, const host_inputs *h) {
    const int64_t T = p->T, F = p->F;
    const double tol = tolerance(p->dtype), tol_w = tolerance(p->weights_dtype);
    double dw1, dw2;
    int64_t rows[3] = {0, T / 2, T - 1}, cols[4] = {0, F / 3, 2 * F / 3, F - 1};
    int n_rows = 0, n_cols = 0;
    void *yrow = host_alloc((size_t)F * p->esize);
    err_acc ey = {0, 0};
    check_result r;

    for (int i = 0; i < 3; ++i) /* distinct, in order */
        if (n_rows == 0 || rows[i] != rows[n_rows - 1]) rows[n_rows++] = rows[i];
    for (int i = 0; i < 4; ++i)
        if (n_cols == 0 || cols[i] != cols[n_cols - 1]) cols[n_cols++] = cols[i];

    CUDA_CHECK(cudaMemsetAsync(p->y, 0xff, (size_t)(T * F) * p->esize, p->stream));
    if (p->x8) CUDA_CHECK(cudaMemsetAsync(p->x8, 0x7f, (size_t)(T * 2 * F), p->stream)); /* NaN */
    run_fwd(p);
    CUDA_CHECK(cudaStreamSynchronize(p->stream));
    r.fp8_mismatches = 0;
    if (p->x8) { /* x8's sampled rows: the cast of x's, in x's layout (x8 keeps its row stride 2F) */
        unsigned char *row8 = host_alloc((size_t)(2 * F));
        for (int k = 0; k < n_rows; ++k) {
            const int64_t t = rows[k];
            download(row8, offset(p->x8, (size_t)(t * 2 * F)), (size_t)(2 * F));
            for (int64_t c = 0; c < 2 * F; ++c) {
                const unsigned char want =
                    fastglu_f32_to_e4m3((float)load_elem(h->x, p->dtype, (size_t)(t * 2 * F + c)),
                                        fastglu_fp8_saturate());
                /* two NaNs match: a GPU's fp16 -> fp32 conversion drops a NaN's sign */
                r.fp8_mismatches +=
                    row8[c] != want && !((row8[c] & 0x7f) == 0x7f && (want & 0x7f) == 0x7f);
            }
        }
        free(row8);
    }
    for (int k = 0; k < n_rows; ++k) {
        const int64_t t = rows[k];
        const double w = p->weights ? load_elem(h->weights, p->weights_dtype, (size_t)t) : 1.0;
        download(yrow, offset(p->y, (size_t)(t * F) * p->esize), (size_t)F * p->esize);
        for (int64_t j = 0; j < F; ++j) {
            const size_t xrow = (size_t)(t * 2 * F);
            const ref_point ref =
                reference(&p->params, load_elem(h->x, p->dtype, xrow + gate_col(p, j)),
                          load_elem(h->x, p->dtype, xrow + up_col(p, j)),
                          p->bias ? load_elem(h->bias, p->dtype, gate_col(p, j)) : 0.0,
                          p->bias ? load_elem(h->bias, p->dtype, up_col(p, j)) : 0.0, w, 0.0);
            err_add(&ey, load_elem(yrow, p->dtype, (size_t)j), ref.y);
        }
    }
    free(yrow);
    r.fwd = err_rel(&ey);
    r.bwd = check_bwd(p, h, rows, n_rows, cols, n_cols, F, 1, &dw1);
    r.bwd_broadcast = check_bwd(p, h, rows, n_rows, cols, n_cols, 0, 0, &dw2);
    r.dweights = worse(dw1, dw2);
    r.tol = tol;
    r.tol_weights = tol_w;
    r.passed = r.fwd <= tol && r.bwd <= tol && r.bwd_broadcast <= tol && r.dweights <= tol_w &&
               r.fp8_mismatches == 0;
    return r;
}

/* The worst check error (of y, d_gate/d_up, dbias) of the passes a mode runs; a wrong fp8 copy
 * (--fp8-store) fails every mode (each forward writes it, each backward reads it). */
static double mode_error(const check_result *c, mode m) {
    if (c->fp8_mismatches) return INFINITY;
    switch (m) {
    case MODE_FORWARD: return c->fwd;
    case MODE_BACKWARD: return worse(c->fwd, c->bwd_broadcast);
    case MODE_FULL: return worse(c->fwd, c->bwd);
    default: return c->bwd;
    }
}

/* 1 when the passes a mode runs passed their check (dweights included for the backwards). */
static int mode_passed(const check_result *c, mode m) {
    return mode_error(c, m) <= c->tol && (m == MODE_FORWARD || c->dweights <= c->tol_weights);
}

/* ---- output ---------------------------------------------------------------------------------------- */

typedef struct row {
    mode m;
    int64_t F;
    timing t;
    double bytes, gbps, floor_ms, ratio;
    check_result check;
} row;

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static const char *dtype_name(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_FP32 ? "fp32" : dt == FASTGLU_DTYPE_FP16 ? "fp16" : "bf16";
}

typedef struct run_info {
    const options *o;
    const struct cudaDeviceProp *prop;
    int runtime_version, driver_version;
    double copy_ms, copy_tbps;
    char utc[32];
} run_info;

static int write_json(const char *path, const run_info *info, const problem *p, const row *rows,
                      int n) {
    const options *o = info->o;
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 0;
    }
    fputs("{\n \"tool\": \"fastglu-bench\",\n \"fastglu_version\": ", f);
    fprintf(f, "\"%d.%d.%d\",\n \"utc\": ", fastglu_version() / 10000,
            fastglu_version() / 100 % 100, fastglu_version() % 100);
    json_string(f, info->utc);
    fputs(",\n \"gpu\": ", f);
    json_string(f, info->prop->name);
    fprintf(f, ",\n \"compute_capability\": \"%d.%d\",\n \"sm_count\": %d,\n", info->prop->major,
            info->prop->minor, info->prop->multiProcessorCount);
    fprintf(f, " \"cuda_runtime_version\": %d,\n \"cuda_driver_version\": %d,\n",
            info->runtime_version, info->driver_version);
    fprintf(f, " \"copy_bytes\": %zu,\n \"copy_ms\": ", COPY_BYTES);
    json_number(f, info->copy_ms);
    fputs(",\n \"copy_TBps\": ", f);
    json_number(f, info->copy_tbps);
    fprintf(f, ",\n \"flush_bytes\": %zu,\n \"warmup_ms\": ", FLUSH_BYTES);
    json_number(f, o->warmup_ms);
    fputs(",\n \"rep_ms\": ", f);
    json_number(f, o->rep_ms);
    fputs(",\n \"timer\": \"cuda_events, triton.testing.do_bench schedule, quantiles "
          "0.5/0.2/0.8\",\n",
          f);
    fputs(" \"rows\": [", f);
    for (int i = 0; i < n; ++i) {
        const row *r = &rows[i];
        fprintf(f, "%s\n  {\"provider\": \"fastglu-c\", \"api\": \"%s\", \"mode\": \"%s\", ",
                i ? "," : "", p->use_glu ? "fastglu_glu" : "fastglu_swiglu", mode_names[r->m]);
        fprintf(
            f,
            "\"seq\": %lld, \"batch\": %lld, \"tokens\": %lld, \"ffn\": %lld, \"dtype\": \"%s\", ",
            (long long)o->seq, (long long)o->batch, (long long)p->T, (long long)r->F,
            dtype_name(p->dtype));
        fprintf(f, "\"activation\": \"%s\", \"layout\": \"%s\", \"bias\": %s, \"weights_dtype\": ",
                activation_names[p->params.activation],
                p->params.layout == FASTGLU_LAYOUT_INTERLEAVED ? "interleaved" : "split",
                p->bias ? "true" : "false");
        if (p->weights)
            fprintf(f, "\"%s\"", dtype_name(p->weights_dtype));
        else
            fputs("null", f);
        fputs(", \"clamp_value\": ", f);
        if (o->clamp_given)
            json_number(f, o->clamp_value);
        else
            fputs("null", f);
        fprintf(f, ", \"fp8_store\": %s", p->x8 ? "true" : "false");
        fputs(", \"ms\": [", f);
        json_number(f, r->t.p50);
        fputs(", ", f);
        json_number(f, r->t.p20);
        fputs(", ", f);
        json_number(f, r->t.p80);
        fprintf(f, "], \"reps\": %ld, \"bytes\": %.0f, \"GBps\": ", r->t.reps, r->bytes);
        json_number(f, r->gbps);
        fputs(", \"floor_ms\": ", f);
        json_number(f, r->floor_ms);
        fputs(", \"ratio_to_floor\": ", f);
        json_number(f, r->ratio);
        fputs(", \"check_fwd_relerr\": ", f);
        json_number(f, r->check.fwd);
        fputs(", \"check_bwd_relerr\": ", f);
        json_number(f, r->check.bwd);
        fputs(", \"check_bwd_broadcast_relerr\": ", f);
        json_number(f, r->check.bwd_broadcast);
        fputs(", \"check_dweights_relerr\": ", f);
        if (p->weights)
            json_number(f, r->check.dweights);
        else
            fputs("null", f);
        if (p->x8) fprintf(f, ", \"check_fp8_copy_mismatches\": %ld", r->check.fp8_mismatches);
        fprintf(f, ", \"status\": \"%s\"}", mode_passed(&r->check, r->m) ? "passed" : "failed");
    }
    fputs("\n ]\n}\n", f);
    if (fclose(f) != 0) {
        perror(path);
        return 0;
    }
    return 1;
}

/* ---- main ---------------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    options o;
    problem p;
    bench_env env;
    host_inputs h;
    run_info info;
    struct cudaDeviceProp prop;
    row rows[MAX_FFN * MODE_COUNT];
    int n_rows = 0, device = 0, n_devices = 0, all_passed = 1;
    int64_t Fmax = 0;
    cudaError_t err;

    parse_options(argc, argv, &o);

    err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess || n_devices == 0 || !fastglu_cuda_available()) {
        printf("fastglu-bench: no CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorString(err)
                                                       : n_devices == 0
                                                           ? "none found"
                                                           : "libfastglu reports none usable");
        return EXIT_NO_DEVICE;
    }
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    memset(&info, 0, sizeof info);
    info.o = &o;
    info.prop = &prop;
    CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
    CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
    {
        const time_t now = time(NULL);
        strftime(info.utc, sizeof info.utc, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    }

    memset(&p, 0, sizeof p);
    p.use_glu = uses_glu(&o);
    p.params.activation = o.activation;
    p.params.layout = o.interleaved ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT;
    p.params.clamp_value = 0.0f;
    p.params.glu_linear_offset = 0.0f;
    p.params.gate_multiplier = 1.0f;
    p.params.down_multiplier = 1.0f;
#if FASTGLU_BENCH_HAVE_GLU
    if (p.use_glu) p.params = fastglu_glu_params_default(o.activation);
    p.params.layout = o.interleaved ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT;
#endif
    if (o.clamp_given) p.params.clamp_value = o.clamp_value;
    p.dtype = o.dtype;
    p.weights_dtype = o.weights_dtype;
    p.esize = fastglu_dtype_size(o.dtype);
    p.wsize = fastglu_dtype_size(o.weights_dtype);
    p.T = o.seq * o.batch;
    for (int i = 0; i < o.n_ffn; ++i) Fmax = o.ffn[i] > Fmax ? o.ffn[i] : Fmax;
    if ((double)p.T * 2.0 * (double)Fmax * (double)p.esize > (double)prop.totalGlobalMem)
        die(EXIT_ERROR, "x alone ([%lld, %lld] %s) is larger than the device's memory",
            (long long)p.T, (long long)(2 * Fmax), dtype_name(o.dtype));

    CUDA_CHECK(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
    env.stream = p.stream;
    env.flush = device_alloc(FLUSH_BYTES);
    env.warmup_ms = o.warmup_ms;
    env.rep_ms = o.rep_ms;

    printf("fastglu-bench: %s (sm_%d%d, %d SMs), libfastglu %d.%d.%d, CUDA runtime %d, driver %d\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, fastglu_version() / 10000,
           fastglu_version() / 100 % 100, fastglu_version() % 100, info.runtime_version,
           info.driver_version);
    printf("shape: S=%lld B=%lld (T=%lld tokens), %s; ", (long long)o.seq, (long long)o.batch,
           (long long)p.T, dtype_name(o.dtype));
    if (!p.use_glu)
        printf("SwiGLU via fastglu_swiglu_fwd_cuda / fastglu_swiglu_bwd_cuda\n");
    else {
        printf("%s via fastglu_glu_fwd_cuda / fastglu_glu_bwd_cuda (%s",
               activation_names[o.activation], o.interleaved ? "interleaved" : "split");
        if (o.bias) printf(", bias + dbias");
        if (o.weights) printf(", %s weights + dweights", dtype_name(o.weights_dtype));
        if (o.clamp_given) printf(", clamp_value %g", (double)o.clamp_value);
        if (o.fp8_store) printf(", fp8 copy written by the forward and read by the backward");
        printf(")\n");
    }
    printf("timing: do_bench schedule, warmup %g ms, rep %g ms, L2 flushed (256 MiB memset) before "
           "each call\n",
           o.warmup_ms, o.rep_ms);
    fflush(stdout);

    { /* the copy bandwidth: bytes read + written over the median of a 1 GiB device-to-device copy */
        copy_arg c;
        timing t;
        c.src = device_alloc(COPY_BYTES);
        c.dst = device_alloc(COPY_BYTES);
        c.bytes = COPY_BYTES;
        c.stream = p.stream;
        CUDA_CHECK(cudaMemsetAsync((void *)(uintptr_t)c.src, 1, COPY_BYTES, p.stream));
        t = do_bench(&env, run_copy, &c);
        info.copy_ms = t.p50;
        info.copy_tbps = 2.0 * (double)COPY_BYTES / (t.p50 * 1e-3) / 1e12;
        CUDA_CHECK(cudaFree((void *)(uintptr_t)c.src));
        CUDA_CHECK(cudaFree(c.dst));
        printf("device-to-device copy: %.3f TB/s (1 GiB, read + written, median %.4f ms of %ld)\n",
               info.copy_tbps, t.p50, t.reps);
    }

    /* inputs: generated once on the host for the largest F, uploaded once */
    {
        const size_t nx = (size_t)(p.T * 2 * Fmax), ny = (size_t)(p.T * Fmax);
        h.x = host_random(o.dtype, nx, -3.0, 3.0);
        h.dy = host_random(o.dtype, ny, -1.0, 1.0);
        h.bias = o.bias ? host_random(o.dtype, (size_t)(2 * Fmax), -0.5, 0.5) : NULL;
        h.weights = o.weights ? host_random(o.weights_dtype, (size_t)p.T, 0.0, 1.0) : NULL;
        p.x = device_copy_of(h.x, nx * p.esize);
        p.dy = device_copy_of(h.dy, ny * p.esize);
        p.y = device_alloc(ny * p.esize);
        p.dx = device_alloc(nx * p.esize);
        if (o.fp8_store) p.x8 = device_alloc(nx);
        if (o.bias) {
            p.bias = device_copy_of(h.bias, (size_t)(2 * Fmax) * p.esize);
            p.dbias = device_alloc((size_t)(2 * Fmax) * p.esize);
        }
        if (o.weights) {
            p.weights = device_copy_of(h.weights, (size_t)p.T * p.wsize);
            p.dweights = device_alloc((size_t)p.T * p.wsize);
        }
#if FASTGLU_BENCH_HAVE_GLU
        if (p.use_glu)
            for (int i = 0; i < o.n_ffn; ++i) {
                const size_t ws = fastglu_glu_bwd_workspace_bytes(p.T, o.ffn[i], o.bias, o.weights);
                p.workspace_bytes = ws > p.workspace_bytes ? ws : p.workspace_bytes;
            }
        if (p.workspace_bytes) p.workspace = device_alloc(p.workspace_bytes);
#endif
        /* cudaMemcpy from pageable memory may return before its DMA ends, and the benchmark's
         * stream does not wait for the legacy stream: finish the uploads before any launch. */
        CUDA_CHECK(cudaDeviceSynchronize());
    }

    printf("\n%-9s %6s %9s %9s %9s %7s %10s %8s %9s %7s %9s %5s\n", "mode", "F", "p50 ms", "p20 ms",
           "p80 ms", "reps", "MB moved", "GB/s", "floor ms", "/floor", "rel err", "check");
    for (int i = 0; i < o.n_ffn; ++i) {
        check_result chk;
        p.F = o.ffn[i];
        chk = check_problem(&p, &h);
        all_passed &= chk.passed;
        if (!chk.passed)
            fprintf(
                stderr,
                "fastglu-bench: check F=%lld FAILED (tolerance %.0e): relative errors forward "
                "%.3e, "
                "backward %.3e, backward with a broadcast dy %.3e, dweights %.3e (tolerance %.0e); "
                "fp8 copy: %ld bytes of the sampled rows wrong\n",
                (long long)p.F, chk.tol, chk.fwd, chk.bwd, chk.bwd_broadcast, chk.dweights,
                chk.tol_weights, chk.fp8_mismatches);
        for (int k = 0; k < o.n_modes; ++k) {
            row *r = &rows[n_rows++];
            mode_arg a;
            a.p = &p;
            a.m = o.modes[k];
            r->m = o.modes[k];
            r->F = p.F;
            r->t = do_bench(&env, run_mode_fn, &a);
            r->bytes = mode_bytes(&p, r->m);
            r->gbps = r->bytes / (r->t.p50 * 1e-3) / 1e9;
            r->floor_ms = r->bytes / (info.copy_tbps * 1e12) * 1e3;
            r->ratio = r->t.p50 / r->floor_ms;
            r->check = chk;
            printf("%-9s %6lld %9.4f %9.4f %9.4f %7ld %10.1f %8.1f %9.4f %7.3f %9.2e %5s\n",
                   mode_names[r->m], (long long)r->F, r->t.p50, r->t.p20, r->t.p80, r->t.reps,
                   r->bytes / 1e6, r->gbps, r->floor_ms, r->ratio, mode_error(&chk, r->m),
                   mode_passed(&chk, r->m) ? "ok" : "FAIL");
            fflush(stdout);
        }
    }

    if (o.json_path) {
        if (!write_json(o.json_path, &info, &p, rows, n_rows)) return EXIT_ERROR;
        printf("wrote %d rows to %s\n", n_rows, o.json_path);
    }

    CUDA_CHECK(cudaFree(env.flush));
    CUDA_CHECK(cudaFree(p.x));
    CUDA_CHECK(cudaFree(p.y));
    CUDA_CHECK(cudaFree(p.dy));
    CUDA_CHECK(cudaFree(p.dx));
    if (p.bias) CUDA_CHECK(cudaFree(p.bias));
    if (p.dbias) CUDA_CHECK(cudaFree(p.dbias));
    if (p.weights) CUDA_CHECK(cudaFree(p.weights));
    if (p.dweights) CUDA_CHECK(cudaFree(p.dweights));
    if (p.workspace) CUDA_CHECK(cudaFree(p.workspace));
    if (p.x8) CUDA_CHECK(cudaFree(p.x8));
    CUDA_CHECK(cudaStreamDestroy(p.stream));
    free((void *)(uintptr_t)h.x);
    free((void *)(uintptr_t)h.dy);
    free((void *)(uintptr_t)h.bias);
    free((void *)(uintptr_t)h.weights);
    if (!all_passed) {
        fprintf(stderr,
                "fastglu-bench: a check against the float64 reference failed (see above)\n");
        return EXIT_ERROR;
    }
    return 0;
}
