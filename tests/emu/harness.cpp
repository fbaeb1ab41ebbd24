/* Compares the emulated CUDA entry points with the CPU backend, buffer for buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <vector>
#include "fastglu.h"
extern "C" {
#include "convert.h"
extern int emu_order;
extern long long emu_max_blocks;
extern long emu_misaligned, emu_bad_launch;
void emu_report(void);
long emu_fastdiv_selftest(long *checked);
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

static float rand_val(void) {
    uint32_t r = xr() % 1000;
    if (r < 30) { /* specials */
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
                   (long)grs, (long)gcs, s1, s2, emu_max_blocks, emu_order);
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
int main(int argc, char **argv) {
    /* argv: dtypes mask, F range lo hi, include large F (0/1), cap list (comma), order, offsets mode */
    int dtmask = argc > 1 ? atoi(argv[1]) : 7;
    int flo = argc > 2 ? atoi(argv[2]) : 1, fhi = argc > 3 ? atoi(argv[3]) : 100;
    int large = argc > 4 ? atoi(argv[4]) : 1;
    const char *caps = argc > 5 ? argv[5] : "0";
    emu_order = argc > 6 ? atoi(argv[6]) : 0;
    int offsets = argc > 7 ? atoi(argv[7]) : 0;
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
        emu_max_blocks = cap ? cap : 2147483647LL;
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
    emu_report();
    return fails != 0;
}
