/* tests/emu/harness.cpp — compares the emulated CUDA entry points (tests/emu/glue.cpp:
 * src/glu_cuda.cu compiled as host C++) with the CPU backend, buffer for buffer, bit for bit:
 *   the plain-SwiGLU sweep  fastglu_swiglu_{fwd,bwd}_cuda (which route to glu_swiglu.cuh's kernels)
 *                           against fastglu_swiglu_*_cpu: every F in a range, tokens 1, 2, 3, 17,
 *                           (input, output) offset pairs, six dy layouts, in place.
 *   the family sweep        fastglu_glu_{fwd,bwd}_cuda against fastglu_glu_*_cpu (family_suite
 *                           below): outputs, d_gate / d_up, the fp8 copy; dbias and dweights
 *                           against the kernels' fixed summation order computed here from the
 *                           family's per-element math (and against the CPU backend where its order
 *                           is the same).
 * Inputs are random with specials (NaN, inf, signed zeros, subnormals, overflow); outputs start as
 * junk (the same in both runs) that must survive outside the written elements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <vector>
#include "fastglu.h"
#include "glu_math.h"
extern "C" {
#include "convert.h"
extern int emu_order;
extern long emu_misaligned, emu_bad_launch;
long emu_report(void);
long emu_registry_size(void);
long emu_fastdiv_selftest(long *checked);
}
static long long cur_cap; /* fastglu_debug_set_max_blocks's cap of the runs (0: none) */
static void set_cap(long long cap) {
    cur_cap = cap;
    fastglu_debug_set_max_blocks(cap);
}
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t xr(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static int ulp_mode; /* 0: bit-exact; 1: count ulp differences in the outputs */
static long nan_bits_diff;
static char cur[256];
static long fails, runs, nfwd, nbwd, ninpl, elems, max_ulp, ulp_hist[4];

/* specials per million values: 3 %, or fewer where a case's sums (dbias, dweights over many
 * terms) would otherwise be NaN or inf nearly everywhere */
static uint32_t special_ppm = 30000;
static float rand_val(void) {
    if (xr() % 1000000 < special_ppm) { /* specials */
        static const float sp[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,    1e4f,  -1e4f, 7e4f,
                                   100.0f, -100.0f, 1e-6f,    -3e-7f,    1e-40f, 88.0f, -88.0f};
        return sp[xr() % (sizeof sp / sizeof *sp)];
    }
    float f = ((int)(xr() % 200001) - 100000) / 12500.0f; /* [-8, 8] */
    return f;
}
static void fill(char *p, size_t n, int dt) {
    for (size_t i = 0; i < n; i++) {
        float f = rand_val();
        if (dt == FASTGLU_DTYPE_FP32)
            memcpy(p + 4 * i, &f, 4);
        else {
            uint16_t h = dt == FASTGLU_DTYPE_FP16 ? f32_to_fp16(f) : f32_to_bf16(f);
            memcpy(p + 2 * i, &h, 2);
        }
    }
}
static void junk(char *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) p[i] = (char)xr();
}
static int64_t ord(uint32_t u, int es) { /* bits to a monotone integer */
    uint32_t sign = es == 4 ? 0x80000000u : 0x8000u;
    return (u & sign) ? -(int64_t)(u & ~sign) : (int64_t)u;
}
static int isnan_bits(uint32_t u, int es, int dt) {
    if (es == 1) return 0; /* fp8 codes: compared as bytes */
    if (es == 4) return (u & 0x7fffffffu) > 0x7f800000u;
    if (dt == FASTGLU_DTYPE_FP16) return (u & 0x7fffu) > 0x7c00u;
    return (u & 0x7fffu) > 0x7f80u;
}
/* outputs compared: mask marks the output elements; everything else must be untouched */
static int compare(const char *cpu, const char *emu, const char *init,
                   const std::vector<char> &mask, size_t nelem, int es, int dt) {
    int bad = 0;
    for (size_t e = 0; e < nelem; e++) {
        const char *a = cpu + e * es, *b = emu + e * es;
        if (!mask[e]) {
            if (memcmp(b, init + e * es, es) || memcmp(a, init + e * es, es)) {
                bad |= 2;
            }
            continue;
        }
        elems++;
        if (!memcmp(a, b, es)) continue;
        uint32_t ua = 0, ub = 0;
        memcpy(&ua, a, es);
        memcpy(&ub, b, es);
        if (isnan_bits(ua, es, dt) && isnan_bits(ub, es, dt)) {
            if (++nan_bits_diff <= 3)
                printf("NaN bits differ: dt%d cpu 0x%x emu 0x%x (elem %zu) in %s\n", dt, ua, ub, e,
                       cur);
            continue;
        }
        if (!ulp_mode) {
            bad |= 1;
            continue;
        }
        if (isnan_bits(ua, es, dt) && isnan_bits(ub, es, dt)) continue;
        if (isnan_bits(ua, es, dt) || isnan_bits(ub, es, dt)) {
            bad |= 4;
            continue;
        }
        int64_t d = ord(ua, es) - ord(ub, es);
        if (d < 0) d = -d;
        if (d > max_ulp) max_ulp = d;
        ulp_hist[d >= 3 ? 3 : d]++;
    }
    return bad;
}
struct buf {
    std::vector<char> v;
};
enum { GUARD = 24 };
static void one(int dt, int64_t T, int64_t F, int64_t ioff, int64_t irs, int64_t ooff, int64_t ors,
                int kind, int64_t goff, int64_t grs, int64_t gcs) {
    const int es = (int)fastglu_dtype_size((fastglu_dtype)dt);
    const int64_t ocols = kind ? 2 * F : F;
    const size_t in_n = GUARD + ioff + (T - 1) * irs + 2 * F + GUARD;
    const size_t out_n = GUARD + ooff + (T - 1) * ors + ocols + GUARD;
    const size_t g_n = GUARD + goff + (T - 1) * grs + (F - 1) * gcs + 1 + GUARD;
    std::vector<char> in(in_n * es), g(g_n * es), oc(out_n * es), oe, oinit;
    fill(in.data(), in_n, dt);
    fill(g.data(), g_n, dt);
    junk(oc.data(), oc.size());
    std::vector<char> in0 = in, g0 = g;
    char *ip = in.data() + (GUARD + ioff) * es, *gp = g.data() + (GUARD + goff) * es;
    fastglu_status s1, s2;
    int bad = 0;
    snprintf(cur, sizeof cur,
             "kind%d T%ld F%ld ioff%ld irs%ld ooff%ld ors%ld dy(off%ld rs%ld cs%ld)", kind, (long)T,
             (long)F, (long)ioff, (long)irs, (long)ooff, (long)ors, (long)goff, (long)grs,
             (long)gcs);
    const long mis0 = emu_misaligned, bl0 = emu_bad_launch;
    if (kind == 2) { /* in place: dinput == input */
        std::vector<char> in2 = in;
        char *ip2 = in2.data() + (GUARD + ioff) * es;
        std::vector<char> mask(in_n, 0);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < 2 * F; j++) mask[GUARD + ioff + t * irs + j] = 1;
        s1 = fastglu_swiglu_bwd_cpu(gp, grs, gcs, ip, irs, ip, irs, T, F, (fastglu_dtype)dt);
        s2 = fastglu_swiglu_bwd_cuda(gp, grs, gcs, ip2, irs, ip2, irs, T, F, (fastglu_dtype)dt,
                                     NULL);
        bad = compare(in.data(), in2.data(), in0.data(), mask, in_n, es, dt);
        if (memcmp(g.data(), g0.data(), g.size())) bad |= 8;
        ninpl++;
    } else {
        oe = oc;
        oinit = oc;
        char *op1 = oc.data() + (GUARD + ooff) * es, *op2 = oe.data() + (GUARD + ooff) * es;
        std::vector<char> mask(out_n, 0);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < ocols; j++) mask[GUARD + ooff + t * ors + j] = 1;
        if (kind == 0) {
            s1 = fastglu_swiglu_fwd_cpu(ip, irs, op1, ors, T, F, (fastglu_dtype)dt);
            s2 = fastglu_swiglu_fwd_cuda(ip, irs, op2, ors, T, F, (fastglu_dtype)dt, NULL);
            nfwd++;
        } else {
            s1 = fastglu_swiglu_bwd_cpu(gp, grs, gcs, ip, irs, op1, ors, T, F, (fastglu_dtype)dt);
            s2 = fastglu_swiglu_bwd_cuda(gp, grs, gcs, ip, irs, op2, ors, T, F, (fastglu_dtype)dt,
                                         NULL);
            nbwd++;
        }
        bad = compare(oc.data(), oe.data(), oinit.data(), mask, out_n, es, dt);
        if (memcmp(in.data(), in0.data(), in.size()) || memcmp(g.data(), g0.data(), g.size()))
            bad |= 8;
    }
    if (s1 || s2) bad |= 16;
    if (emu_misaligned != mis0 || emu_bad_launch != bl0) bad |= 32;
    runs++;
    if (bad) {
        if (++fails <= 30)
            printf("FAIL(%d) %s dt%d T%ld F%ld ioff%ld irs%ld ooff%ld ors%ld dy(off%ld rs%ld "
                   "cs%ld) status %d/%d cap %lld order %d\n",
                   bad,
                   kind == 0   ? "fwd"
                   : kind == 1 ? "bwd"
                               : "inplace",
                   dt, (long)T, (long)F, (long)ioff, (long)irs, (long)ooff, (long)ors, (long)goff,
                   (long)grs, (long)gcs, s1, s2, cur_cap, emu_order);
    }
}
static const int64_t IPAD[] = {0, 1, 2, 3, 5, 8}, OPAD[] = {0, 1, 2, 4, 8};
static void config(int dt, int64_t T, int64_t F, int offsets) {
    for (int64_t ioff = 0; ioff < 8; ioff++)
        for (int64_t ooff = 0; ooff < 8; ooff++) {
            if (offsets == 1 && ((ioff + ooff) & 1)) continue;        /* half the pairs */
            if (offsets == 2 && (ioff + 3 * ooff) % 8 >= 2) continue; /* 16 pairs */
            const int64_t irs = 2 * F + IPAD[(ioff + ooff) % 6];
            const int64_t opad = OPAD[(5 * ooff + ioff) % 5];
            const int64_t goff = (3 * ioff + ooff) % 8;
            one(dt, T, F, ioff, irs, ooff, F + opad, 0, 0, 0, 0);
            /* dy modes: contiguous, contiguous padded, scalar 0/0, row-broadcast, transposed, column stride 2 */
            const int64_t gm[6][2] = {{F, 1}, {F + 3, 1}, {0, 0}, {0, 1}, {1, T}, {2 * F + 1, 2}};
            for (int m = 0; m < 6; m++) {
                one(dt, T, F, ioff, irs, ooff, 2 * F + opad, 1, goff, gm[m][0], gm[m][1]);
                if (ooff < 4 || offsets)
                    one(dt, T, F, ioff, irs, 0, 0, 2, (goff + m) % 8, gm[m][0], gm[m][1]);
            }
        }
    /* overlapping input rows (row stride 0 and 1), and T == 1 with odd row strides */
    if (T > 1) {
        one(dt, T, F, 3, 0, 1, F, 0, 0, 0, 0);
        one(dt, T, F, 1, 1, 2, 2 * F, 1, 5, F, 1);
        one(dt, T, F, 2, 0, 0, 2 * F + 1, 1, 0, 0, 0);
    } else {
        one(dt, 1, F, 1, 3, 1, 5, 0, 0, 0, 0);
        one(dt, 1, F, 1, 0, 3, 7, 1, 1, 9, 1);
        one(dt, 1, F, 5, 1, 0, 0, 2, 2, 0, 3);
    }
}
/* ---- the family sweep ------------------------------------------------------------------------ */

enum { FGUARD = 32 }; /* elements before and after each output: 16-byte multiples for fp8 too */
/* 16-byte aligned storage; pointers into it at chosen element offsets */
struct alignas(16) blk16 {
    unsigned char b[16];
};
struct store {
    std::vector<blk16> v;
    size_t bytes;
    explicit store(size_t n = 0) : v(n / 16 + 2), bytes(n) {}
    char *p() { return (char *)v.data(); }
};
static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(xr() % (uint64_t)n) : 0; }
static float rand_scale(void) { /* scale_inv: mostly positive finite, some specials */
    static const float sp[] = {0.0f, -0.0f, INFINITY, NAN, 1e30f, 1e-30f, -2.0f, 1.0f};
    if (xr() % 1000000 < 3 * special_ppm) return sp[xr() % 8];
    return (float)(1 + xr() % 4000) / 1000.0f;
}
static void fill_dt(char *p, size_t n, fastglu_dtype dt) {
    if (dt != FASTGLU_DTYPE_FP8_E4M3) return fill(p, n, (int)dt);
    for (size_t i = 0; i < n;
         i++) { /* every code; NaN (S.1111.111) kept at 8x the specials' rate */
        unsigned char b = (unsigned char)xr();
        if ((b & 0x7f) == 0x7f && xr() % 1000000 >= special_ppm * 8) b ^= 1;
        p[i] = (char)b;
    }
}
static float load_el(fastglu_dtype dt, const char *base, int64_t i) {
    uint16_t h;
    switch (dt) {
    case FASTGLU_DTYPE_FP32: {
        float f;
        memcpy(&f, base + 4 * i, 4);
        return f;
    }
    case FASTGLU_DTYPE_FP16: memcpy(&h, base + 2 * i, 2); return fp16_to_f32(h);
    case FASTGLU_DTYPE_BF16: memcpy(&h, base + 2 * i, 2); return bf16_to_f32(h);
    default: return fastglu_e4m3_to_f32((unsigned char)base[i]);
    }
}
static void store_el(fastglu_dtype dt, char *base, int64_t i, float f) {
    uint16_t h;
    if (dt == FASTGLU_DTYPE_FP32) return (void)memcpy(base + 4 * i, &f, 4);
    h = dt == FASTGLU_DTYPE_FP16 ? f32_to_fp16(f) : f32_to_bf16(f);
    memcpy(base + 2 * i, &h, 2);
}

/* One case of the family: its parameters, shape and memory layout. */
struct fcase {
    fastglu_glu_params p;
    fastglu_dtype dt, wdt; /* wdt: the weights' dtype */
    int64_t T, F;
    int bias, weights, misalign; /* misalign: random element offsets and strides (else 16-byte) */
    int64_t wstride;
    int fp8_copy;                 /* forward: saved_fp8 */
    int in_fp8, scale_mode;       /* backward: fp8 operands; scale_inv absent / tensor / token /
                                     1 x 128 blocks (scale_1x128) */
    int dbias, dweights, inplace; /* backward */
    int dy_mode;                  /* dy_layout below */
    int generic;                  /* fastglu_debug_set_generic_kernels */
    int plain;                    /* plain SwiGLU: no bias, weights or fp8 */
};
/* dy's (row stride, column stride): contiguous, padded, scalar, row broadcast, column stride 2,
 * transposed, column broadcast */
static void dy_layout(int mode, int64_t T, int64_t F, int64_t *rs, int64_t *cs) {
    switch (mode) {
    case 0: *rs = F, *cs = 1; break;
    case 1: *rs = F + 8, *cs = 1; break;
    case 2: *rs = 0, *cs = 0; break;
    case 3: *rs = 0, *cs = 1; break;
    case 4: *rs = 2 * F + 1, *cs = 2; break;
    case 5: *rs = 1, *cs = T; break;
    default: *rs = 1, *cs = 0; break;
    }
}

static long fam_fails, fam_fwd, fam_bwd;
static char fcur[400];
static void describe(const fcase &c, const char *what) {
    snprintf(fcur, sizeof fcur,
             "%s act%d %s dt%d T%ld F%ld clamp%g off%g gm%g dm%g bias%d w%d(dt%d ws%ld) mis%d "
             "fp8copy%d in_fp8%d scale%d db%d dw%d inpl%d dy%d generic%d cap%lld order%d",
             what, (int)c.p.activation, c.p.layout ? "IL" : "SPLIT", (int)c.dt, (long)c.T,
             (long)c.F, (double)c.p.clamp_value, (double)c.p.glu_linear_offset,
             (double)c.p.gate_multiplier, (double)c.p.down_multiplier, c.bias, c.weights,
             (int)c.wdt, (long)c.wstride, c.misalign, c.fp8_copy, c.in_fp8, c.scale_mode, c.dbias,
             c.dweights, c.inplace, c.dy_mode, c.generic, cur_cap, emu_order);
    snprintf(cur, sizeof cur, "%s", fcur); /* compare's NaN-bits messages */
}
static void ffail(const char *why) {
    if (++fam_fails <= 30) printf("FAIL %s: %s\n", fcur, why);
}

/* a buffer written by both backends: the CPU's copy, the emulation's, their common start, and
 * which elements are outputs */
struct outbuf {
    store cpu, emu, init;
    std::vector<char> mask;
    size_t n;
    int es;
    fastglu_dtype dt;
    outbuf(size_t n_, fastglu_dtype dt_)
        : cpu(n_ * fastglu_dtype_size(dt_)), emu(n_ * fastglu_dtype_size(dt_)),
          init(n_ * fastglu_dtype_size(dt_)), mask(n_, 0), n(n_), es((int)fastglu_dtype_size(dt_)),
          dt(dt_) {
        junk(init.p(), init.bytes);
        memcpy(cpu.p(), init.p(), init.bytes);
        memcpy(emu.p(), init.p(), init.bytes);
    }
    void rows(int64_t off, int64_t T, int64_t rs, int64_t cols) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < cols; j++) mask[off + t * rs + j] = 1;
    }
    void check(const char *name) {
        const int bad = compare(cpu.p(), emu.p(), init.p(), mask, n, es, (int)dt);
        if (bad) {
            char b[80];
            snprintf(b, sizeof b, "%s differs (%s)", name,
                     bad & 2 ? "written outside its elements" : "values");
            ffail(b);
        }
    }
};

/* element offsets and strides of one case's operands: aligned to 16 bytes, or random */
static int64_t pad_to(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
struct geom {
    int64_t off, rs;
};
static geom make_geom(const fcase &c, int64_t cols, int es, int64_t extra_max) {
    geom g;
    const int64_t e = 16 / es;
    if (c.misalign) {
        g.off = rnd(e) + (xr() % 4 == 0 ? 0 : 1);
        g.rs = cols + rnd(extra_max + 1);
        if (c.T == 1 && xr() % 3 == 0) g.rs = rnd(3); /* one row: any stride */
    } else {
        g.off = 0, g.rs = pad_to(cols, e) + e * rnd(2);
    }
    return g;
}

static void run_fwd(const fcase &c) {
    describe(c, "fwd");
    special_ppm = 30000;
    const fastglu_dtype dt = c.dt;
    const int es = (int)fastglu_dtype_size(dt), il = c.p.layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int64_t T = c.T, F = c.F;
    /* operands: IL [T, 2F]; SPLIT gate | up in one row (up at F + uoff) */
    const int64_t uoff = il ? 0 : F + (c.misalign ? rnd(3) : 0);
    const geom gi = make_geom(c, il ? 2 * F : uoff + F, es, 5);
    const size_t in_n = gi.off + (T - 1) * gi.rs + 2 * F + 8;
    store in(in_n * es);
    fill_dt(in.p(), in_n, dt);
    const int64_t boff = c.misalign ? rnd(8) : 0, woff = c.misalign ? rnd(3) : 0;
    store bias((boff + 2 * F) * es), w((woff + (T - 1) * c.wstride + 1) * 4);
    fill_dt(bias.p(), boff + 2 * F, dt);
    fill_dt(w.p(), woff + (T - 1) * c.wstride + 1, c.wdt);
    const store in0 = in, bias0 = bias, w0 = w;
    const geom go = make_geom(c, F, es, 5);
    outbuf out(FGUARD + go.off + (T - 1) * go.rs + F + FGUARD, dt);
    out.rows(FGUARD + go.off, T, go.rs, F);
    const geom gf = make_geom(c, 2 * F, 1, 7);
    outbuf f8(FGUARD + gf.off + (T - 1) * gf.rs + 2 * F + FGUARD, FASTGLU_DTYPE_FP8_E4M3);
    if (c.fp8_copy) f8.rows(FGUARD + gf.off, T, gf.rs, 2 * F);

    fastglu_glu_operands ops;
    memset(&ops, 0, sizeof ops);
    char *g = in.p() + gi.off * es;
    ops.gate = {g, dt, gi.rs};
    if (!il) ops.up = {g + uoff * es, dt, gi.rs};
    if (c.bias) ops.bias = {bias.p() + boff * es, dt, 1};
    if (c.weights) ops.weights = {w.p() + woff * fastglu_dtype_size(c.wdt), c.wdt, c.wstride};
    fastglu_status st[2];
    for (int k = 0; k < 2; k++) {
        char *ob = (k ? out.emu.p() : out.cpu.p()) + (FGUARD + go.off) * es;
        char *fb = (k ? f8.emu.p() : f8.cpu.p()) + FGUARD + gf.off;
        fastglu_tensor output = {ob, dt, go.rs};
        fastglu_tensor saved = {c.fp8_copy ? fb : NULL, FASTGLU_DTYPE_FP8_E4M3, gf.rs};
        st[k] = k ? fastglu_glu_fwd_cuda(&c.p, &ops, output, saved, T, F, NULL)
                  : fastglu_glu_fwd_cpu(&c.p, &ops, output, saved, T, F);
        if (st[k]) {
            char b[300];
            snprintf(b, sizeof b, "%s status %d: %s", k ? "emulated" : "cpu", (int)st[k],
                     fastglu_last_error_message());
            ffail(b);
            return;
        }
    }
    out.check("output");
    f8.check("saved_fp8");
    if (memcmp(in.p(), in0.v.data(), in.bytes) || memcmp(bias.p(), bias0.v.data(), bias.bytes) ||
        memcmp(w.p(), w0.v.data(), w.bytes))
        ffail("an input was written");
    fam_fwd++;
}

static void run_bwd(const fcase &c) {
    describe(c, "bwd");
    const fastglu_dtype dt = c.dt, idt = c.in_fp8 ? FASTGLU_DTYPE_FP8_E4M3 : dt;
    const int es = (int)fastglu_dtype_size(dt), ies = (int)fastglu_dtype_size(idt);
    const int il = c.p.layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int64_t T = c.T, F = c.F;
    special_ppm = (c.dbias || c.dweights) && T * F > 1000 ? 30 : 30000;
    const int64_t uoff = il ? 0 : F + (c.misalign ? rnd(3) : 0);
    const geom gi = make_geom(c, il ? 2 * F : uoff + F, ies, 5);
    const size_t in_n = FGUARD + gi.off + (T - 1) * gi.rs + 2 * F + 8 + FGUARD;
    /* the operands: an input, or in place the gradients' buffer too */
    outbuf in(in_n, idt);
    fill_dt(in.init.p(), in_n, idt);
    memcpy(in.cpu.p(), in.init.p(), in.init.bytes);
    memcpy(in.emu.p(), in.init.p(), in.init.bytes);
    const int64_t gbase = FGUARD + gi.off;
    const int64_t boff = c.misalign ? rnd(8) : 0, woff = c.misalign ? rnd(3) : 0;
    store bias((boff + 2 * F) * es), w((woff + (T - 1) * c.wstride + 1) * 4);
    fill_dt(bias.p(), boff + 2 * F, dt);
    fill_dt(w.p(), woff + (T - 1) * c.wstride + 1, c.wdt);
    const int64_t soff = c.misalign ? rnd(3) : 0;
    /* scale_mode 3: [T, nb] block scales, row stride nb + 1 */
    const int64_t nb = fastglu_glu_scale_blocks(c.p.layout, F);
    const int64_t sc_rs = c.scale_mode == 3 ? nb + 1 : c.scale_mode == 1 ? 0 : 1;
    const int64_t sc_n = c.scale_mode == 3 ? T * sc_rs : T;
    store sc((soff + sc_n) * 4);
    for (int64_t i = 0; i < soff + sc_n; i++) {
        const float f = rand_scale();
        memcpy(sc.p() + 4 * i, &f, 4);
    }
    int64_t dyrs, dycs;
    dy_layout(c.dy_mode, T, F, &dyrs, &dycs);
    const int64_t dyoff = c.misalign ? rnd(8) : 0;
    const size_t dy_n = dyoff + (T - 1) * dyrs + (F - 1) * dycs + 1;
    store dy(dy_n * es);
    fill_dt(dy.p(), dy_n, dt);
    const store bias0 = bias, w0 = w, sc0 = sc, dy0 = dy;

    /* the gradients: in place, the operands' elements; else IL [T, 2F], SPLIT d_gate | d_up */
    const int64_t duoff = il ? 0 : F + (c.misalign ? rnd(3) : 0);
    const geom gd = make_geom(c, il ? 2 * F : duoff + F, es, 5);
    outbuf dg(FGUARD + gd.off + (T - 1) * gd.rs + 2 * F + 8 + FGUARD, dt);
    if (c.inplace) {
        if (il)
            in.rows(gbase, T, gi.rs, 2 * F);
        else
            in.rows(gbase, T, gi.rs, F), in.rows(gbase + uoff, T, gi.rs, F);
    } else if (il) {
        dg.rows(FGUARD + gd.off, T, gd.rs, 2 * F);
    } else {
        dg.rows(FGUARD + gd.off, T, gd.rs, F), dg.rows(FGUARD + gd.off + duoff, T, gd.rs, F);
    }
    const int64_t dboff = c.misalign ? rnd(8) : 0, dwoff = c.misalign ? rnd(3) : 0;
    outbuf db(FGUARD + dboff + 2 * F + FGUARD, dt), dw(FGUARD + dwoff + T + FGUARD, c.wdt);
    if (c.dbias) db.rows(FGUARD + dboff, 1, 0, 2 * F);
    if (c.dweights) dw.rows(FGUARD + dwoff, 1, 0, T);
    const size_t wsb = fastglu_glu_bwd_workspace_bytes(T, F, c.dbias, c.dweights);
    store ws_cpu(wsb), ws_emu(wsb);
    junk(ws_cpu.p(), ws_cpu.bytes);
    memcpy(ws_emu.p(), ws_cpu.p(), ws_cpu.bytes);

    fastglu_glu_operands ops;
    memset(&ops, 0, sizeof ops);
    if (c.bias) ops.bias = {bias.p() + boff * es, dt, 1};
    if (c.weights) ops.weights = {w.p() + woff * fastglu_dtype_size(c.wdt), c.wdt, c.wstride};
    if (c.in_fp8 && c.scale_mode)
        ops.scale_inv = {sc.p() + soff * 4, FASTGLU_DTYPE_FP32, sc_rs},
        ops.scale_1x128 = c.scale_mode == 3;
    for (int k = 0; k < 2; k++) {
        char *ib = (k ? in.emu.p() : in.cpu.p()) + gbase * ies;
        ops.gate = {ib, idt, gi.rs};
        ops.up = {il ? NULL : ib + uoff * ies, idt, gi.rs};
        fastglu_glu_grads gr;
        memset(&gr, 0, sizeof gr);
        char *gb = (k ? dg.emu.p() : dg.cpu.p()) + (FGUARD + gd.off) * es;
        if (c.inplace) {
            gr.d_gate = ops.gate, gr.d_up = ops.up;
        } else {
            gr.d_gate = {gb, dt, gd.rs};
            if (!il) gr.d_up = {gb + duoff * es, dt, gd.rs};
        }
        if (c.dbias) gr.dbias = {(k ? db.emu.p() : db.cpu.p()) + (FGUARD + dboff) * es, dt, 1};
        if (c.dweights)
            gr.dweights = {(k ? dw.emu.p() : dw.cpu.p()) + (FGUARD + dwoff) * dw.es, c.wdt, 1};
        fastglu_tensor dyt = {dy.p() + dyoff * es, dt, dyrs};
        fastglu_workspace wsp = {wsb ? (k ? ws_emu.p() : ws_cpu.p()) : NULL, wsb};
        const fastglu_status st =
            k ? fastglu_glu_bwd_cuda(&c.p, dyt, dycs, &ops, &gr, wsp, T, F, NULL)
              : fastglu_glu_bwd_cpu(&c.p, dyt, dycs, &ops, &gr, wsp, T, F);
        if (st) {
            char b[300];
            snprintf(b, sizeof b, "%s status %d: %s", k ? "emulated" : "cpu", (int)st,
                     fastglu_last_error_message());
            ffail(b);
            return;
        }
    }
    in.check(c.inplace ? "d_gate / d_up (in place)" : "the operands (an input)");
    dg.check("d_gate / d_up");
    /* dbias, dweights: the CPU backend sums the kernels' terms in the kernels' order
     * (src/glu_cpu.c), so they compare bit for bit like every other output */
    if (c.dbias) db.check("dbias");
    if (c.dweights) dw.check("dweights");
    if (!c.dbias) db.check("dbias (absent)");
    if (!c.dweights) dw.check("dweights (absent)");
    if (memcmp(bias.p(), bias0.v.data(), bias.bytes) || memcmp(w.p(), w0.v.data(), w.bytes) ||
        memcmp(sc.p(), sc0.v.data(), sc.bytes) || memcmp(dy.p(), dy0.v.data(), dy.bytes))
        ffail("an input was written");
    special_ppm = 30000;
    fam_bwd++;
}

/* the parameters of math mode mm (glu_math.h's math_mode_of), with random values */
static void params_for_mode(fcase &c, int mm, int split_plain) {
    static const float clamps[] = {7.0f, 2.5f, 1.1f, 0.75f, INFINITY};
    static const float offsets[] = {1.0f, -0.5f, 0.25f};
    static const float mults[] = {0.5f, 1.25f, 2.0f, 0.7f};
    fastglu_glu_params &p = c.p;
    const fastglu_layout layout = p.layout;
    switch (mm) {
    case MM_K: /* SiLU without extras in SPLIT would be plain SwiGLU: quick-GELU there */
        p = fastglu_glu_params_default(split_plain ? FASTGLU_ACT_QUICK_GELU
                                       : xr() % 2  ? FASTGLU_ACT_SILU
                                                   : FASTGLU_ACT_QUICK_GELU);
        break;
    case MM_KCLAMP:
        p = fastglu_glu_params_default(xr() % 2 ? FASTGLU_ACT_SILU : FASTGLU_ACT_QUICK_GELU);
        p.clamp_value = clamps[xr() % 5];
        if (xr() % 2) p.glu_linear_offset = offsets[xr() % 3];
        break;
    case MM_GELU: p = fastglu_glu_params_default(FASTGLU_ACT_GELU_TANH); break;
    default: {
        p = fastglu_glu_params_default((fastglu_activation)(xr() % 3));
        const int how = xr() % 4;
        if (how == 0) p.gate_multiplier = mults[xr() % 4];
        if (how == 1) p.down_multiplier = mults[xr() % 4];
        if (how == 2) p.glu_linear_offset = offsets[xr() % 3]; /* without a clamp */
        if (how == 3) {
            p = fastglu_glu_params_default(FASTGLU_ACT_GELU_TANH);
            p.clamp_value = clamps[xr() % 4];
        }
        if (xr() % 3 == 0) p.gate_multiplier = mults[xr() % 4];
        break;
    }
    }
    p.layout = layout;
}
static fcase base_case(fastglu_dtype dt, int il, int64_t T, int64_t F) {
    fcase c;
    memset(&c, 0, sizeof c);
    c.p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    c.p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT;
    c.dt = dt, c.T = T, c.F = F;
    static const fastglu_dtype wdts[] = {FASTGLU_DTYPE_FP32, FASTGLU_DTYPE_BF16,
                                         FASTGLU_DTYPE_FP16};
    c.wdt = wdts[xr() % 3];
    c.wstride = 1;
    return c;
}
static void with_weights(fcase &c, int on) {
    c.weights = on;
    if (on && xr() % 3 == 0) c.wstride = xr() % 2 ? 0 : 3;
}

/* Every specialised kernel, full-width (16-byte aligned operands, F a multiple of the chunk):
 * per dtype, layout and math mode, the forward's 8 cases (bias, weights, the fp8 copy), the flat
 * backward's 4 (bias, weights) and its dweights case (16-bit, F = 256), the tile kernel's 3 (dbias,
 * dweights, both), with operands of the dtype and fp8; and per dtype and layout the general kernels
 * on misaligned operands. Threads in order, grids uncapped. */
static void coverage(void) {
    emu_order = 0;
    set_cap(0);
    for (int d = 0; d < 3; d++)
        for (int il = 0; il < 2; il++) {
            const fastglu_dtype dt = (fastglu_dtype)d;
            for (int mm = 0; mm < 4; mm++) {
                for (int k = 0; k < 8; k++) {
                    fcase c = base_case(dt, il, 3, 24);
                    c.bias = k & 1, c.fp8_copy = k >> 2 & 1;
                    with_weights(c, k >> 1 & 1);
                    params_for_mode(c, mm, !il && k == 0);
                    if (c.fp8_copy && c.p.clamp_value >= 448.0f && !isinf(c.p.clamp_value))
                        c.p.clamp_value = 7.0f;
                    run_fwd(c);
                }
                for (int f8 = 0; f8 < 2; f8++) {
                    for (int k = 0; k < 8; k++) { /* 0-3: flat (bias, weights); 4-6 tile; 7 */
                        const int64_t F = k == 7 ? 256 : 24;
                        if (k == 7 && d == 0) continue; /* fp32 sums dweights in the tile kernel */
                        fcase c = base_case(dt, il, 3, F);
                        c.in_fp8 = f8, c.scale_mode = f8 ? (int)(xr() % 4) : 0;
                        if (k < 4) {
                            c.bias = k & 1;
                            with_weights(c, k >> 1 & 1);
                        } else if (k < 7) {
                            c.bias = c.dbias = (k - 3) & 1;
                            with_weights(c, 0);
                            c.weights = c.dweights = (k - 3) >> 1 & 1;
                        } else {
                            with_weights(c, 1);
                            c.dweights = 1;
                        }
                        c.dy_mode = xr() % 2; /* column stride 1: the specialised kernels' */
                        c.inplace = !f8 && xr() % 4 == 0;
                        params_for_mode(c, mm, !il && !f8 && k == 0);
                        run_bwd(c);
                    }
                }
            }
            /* the general kernels: misaligned operands */
            for (int k = 0; k < 5; k++) {
                fcase c = base_case(dt, il, 3, 24);
                c.misalign = 1;
                params_for_mode(c, (int)(xr() % 4), 0);
                if (k == 0) {
                    c.bias = 1, c.fp8_copy = 1;
                    with_weights(c, 1);
                    if (c.p.clamp_value >= 448.0f && !isinf(c.p.clamp_value))
                        c.p.clamp_value = 7.0f;
                    run_fwd(c);
                    continue;
                }
                c.in_fp8 = k >= 3, c.scale_mode = c.in_fp8 ? 2 : 0;
                c.bias = 1, c.dbias = k % 2 == 0;
                with_weights(c, 1);
                c.dweights = c.dbias;
                run_bwd(c);
            }
        }
}

/* The reductions over many terms: 5 slabs of rows (dbias; 257 tokens) and 6 column tiles, the
 * last partial (dweights; F = 1408), or F = 256 (the flat backward's dweights, 16-bit), per dtype,
 * layout and operand type, full-width and misaligned, with sparse specials (the sums stay finite
 * in most rows and columns). */
static void reductions(void) {
    for (int d = 0; d < 3; d++)
        for (int il = 0; il < 2; il++)
            for (int f8 = 0; f8 < 2; f8++)
                for (int mis = 0; mis < 2; mis++) {
                    fcase c = base_case((fastglu_dtype)d, il, 257, mis && d ? 256 : 1408);
                    params_for_mode(c, (int)(xr() % 4), 0);
                    c.misalign = mis && !d;
                    c.in_fp8 = f8, c.scale_mode = f8 ? (int)(xr() % 4) : 0;
                    c.bias = c.dbias = c.F != 256;
                    with_weights(c, 1);
                    c.dweights = 1;
                    c.dy_mode = c.misalign ? (int)(xr() % 7) : 0;
                    set_cap(xr() % 2 ? 3 : 0);
                    emu_order = (int)(xr() % 3);
                    run_bwd(c);
                }
    set_cap(0);
    emu_order = 0;
}

/* Random cases over F and tokens: every parameter, layout, dtype, alignment, dy layout, with
 * grids capped at 3 blocks or not, the threads in order, reversed or shuffled, and the general
 * kernels forced or not. */
static void random_case(fastglu_dtype dt, int64_t T, int64_t F) {
    fcase c = base_case(dt, (int)(xr() % 2), T, F);
    c.plain = xr() % 6 == 0;
    if (c.plain) { /* glu_swiglu.cuh's kernels */
        c.p.layout = FASTGLU_LAYOUT_SPLIT;
    } else {
        params_for_mode(c, (int)(xr() % 4), 0);
        c.bias = xr() % 2;
        with_weights(c, xr() % 2);
    }
    c.misalign = xr() % 2;
    c.generic = xr() % 5 == 0;
    set_cap(xr() % 2 ? 3 : 0);
    emu_order = (int)(xr() % 3);
    fastglu_debug_set_generic_kernels(c.generic);
    c.fp8_copy = !c.plain && xr() % 3 == 0;
    if (c.fp8_copy && c.p.clamp_value >= 448.0f && !isinf(c.p.clamp_value)) c.p.clamp_value = 7.0f;
    run_fwd(c);
    c.fp8_copy = 0;
    c.in_fp8 = !c.plain && xr() % 3 == 0;
    c.scale_mode = c.in_fp8 ? (int)(xr() % 4) : 0;
    c.dbias = c.bias && xr() % 3 != 0;
    c.dweights = c.weights && xr() % 3 != 0;
    c.inplace = !c.in_fp8 && xr() % 5 == 0;
    c.dy_mode = (int)(xr() % 7);
    run_bwd(c);
    fastglu_debug_set_generic_kernels(0);
}

static void family_suite(int scale) {
    coverage();
    reductions();
    static const int64_t Fs[] = {1, 2, 3, 7, 8, 9, 24, 1408, 3420};
    static const int64_t Ts[] = {1, 3, 257};
    for (int64_t F : Fs)
        for (int64_t T : Ts) {
            /* cases per shape: many where small, one or two where T F is large */
            const int64_t n = T * F;
            const int cases = scale * (n <= 1000 ? 9 : n <= 10000 ? 3 : F > 2000 ? 1 : 2);
            for (int i = 0; i < cases; i++) random_case((fastglu_dtype)(i % 3), T, F);
        }
    set_cap(0);
    emu_order = 0;
    printf("family: fwd %ld bwd %ld runs, fails %ld\n", fam_fwd, fam_bwd, fam_fails);
}

int main(int argc, char **argv) {
    /* argv: the plain-SwiGLU sweep's dtypes mask, F range lo hi, include large F (0/1), cap list
     * (comma), order, offsets mode; then the family sweep's scale (cases per shape x scale; 0:
     * none). EMU_REQUIRE_ALL_KERNELS: fail unless every kernel glu_cuda.cu can launch ran. */
    int dtmask = argc > 1 ? atoi(argv[1]) : 7;
    int flo = argc > 2 ? atoi(argv[2]) : 1, fhi = argc > 3 ? atoi(argv[3]) : 100;
    int large = argc > 4 ? atoi(argv[4]) : 1;
    const char *caps = argc > 5 ? argv[5] : "0";
    emu_order = argc > 6 ? atoi(argv[6]) : 0;
    int offsets = argc > 7 ? atoi(argv[7]) : 0;
    int family = argc > 8 ? atoi(argv[8]) : 1;
    ulp_mode = getenv("EMU_ULP") != NULL;
    if (getenv("EMU_FASTDIV")) {
        long checked;
        long bad = emu_fastdiv_selftest(&checked);
        printf("fastdiv: %ld checked, %ld wrong\n", checked, bad);
        if (bad) return 1;
    }
    std::vector<long long> caplist;
    for (const char *c = caps; *c;) {
        caplist.push_back(atoll(c));
        while (*c && *c != ',') c++;
        if (*c) c++;
    }
    std::vector<int64_t> Fs;
    for (int f = flo; f <= fhi; f++) Fs.push_back(f);
    if (large) {
        Fs.push_back(1408);
        Fs.push_back(3420);
        Fs.push_back(5632);
    }
    const int64_t Ts[] = {1, 2, 3, 17};
    for (long long cap : caplist) {
        set_cap(cap);
        for (int dt = 0; dt < 3; dt++)
            if (dtmask >> dt & 1)
                for (int64_t F : Fs)
                    for (int64_t T : Ts)
                        config(dt, T, F, F > 1000 ? (offsets ? offsets : 1) : offsets);
    }
    printf("runs %ld (fwd %ld bwd %ld inplace %ld) output elements compared %ld fails %ld\n", runs,
           nfwd, nbwd, ninpl, elems, fails);
    printf("NaN outputs with differing NaN bits (not counted as failures): %ld\n", nan_bits_diff);
    if (ulp_mode)
        printf("ulp: max %ld, hist 0:%ld 1:%ld 2:%ld >=3:%ld\n", max_ulp, ulp_hist[0], ulp_hist[1],
               ulp_hist[2], ulp_hist[3]);
    set_cap(0);
    if (family) family_suite(family);
    const long hit = emu_report();
    const long min_hit = getenv("EMU_REQUIRE_ALL_KERNELS") ? emu_registry_size() : 0;
    if (hit < min_hit) printf("FAIL: %ld of the %ld kernels ran\n", hit, min_hit);
    return fails != 0 || fam_fails != 0 || emu_misaligned != 0 || emu_bad_launch != 0 ||
           hit < min_hit;
}
