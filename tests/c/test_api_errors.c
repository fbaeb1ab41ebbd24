/* test_api_errors.c — every rejected argument gives its status and a message naming it, and
 * leaves the output untouched; empty problems succeed without touching anything. Runs on the CPU
 * entry points, and on the CUDA ones for the checks that happen before any device access. */
#include <stdio.h>
#include <string.h>

#include "fastglu.h"

static int failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: ", __LINE__);                                                    \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { T = 4, F = 8 };
static float in[T][2 * F], out[T][F], dy[T][F], din[T][2 * F];
static unsigned char snapshot[sizeof out + sizeof din];

static void poison(void) {
    memset(out, 0x7f, sizeof out);
    memset(din, 0x7f, sizeof din);
    memcpy(snapshot, out, sizeof out);
    memcpy(snapshot + sizeof out, din, sizeof din);
}

static int untouched(void) {
    return memcmp(snapshot, out, sizeof out) == 0 &&
           memcmp(snapshot + sizeof out, din, sizeof din) == 0;
}

/* One rejected forward call on both backends. */
static void fwd_case(int line, fastglu_status want, const char *needle, const void *i, int64_t irs,
                     void *o, int64_t ors, int64_t t, int64_t f, fastglu_dtype dt) {
    for (int cuda = 0; cuda < 2; ++cuda) {
        poison();
        fastglu_status st = cuda ? fastglu_swiglu_fwd_cuda(i, irs, o, ors, t, f, dt, NULL)
                                 : fastglu_swiglu_fwd_cpu(i, irs, o, ors, t, f, dt);
        const char *msg = fastglu_last_error_message();
        EXPECT(st == want, "case at line %d (%s): status %d, want %d (%s)", line,
               cuda ? "cuda" : "cpu", st, want, msg);
        EXPECT(strstr(msg, needle) != NULL, "case at line %d: message '%s' lacks '%s'", line, msg,
               needle);
        EXPECT(untouched(), "case at line %d: output changed", line);
    }
}

static void bwd_case(int line, fastglu_status want, const char *needle, const void *g, int64_t grs,
                     int64_t gcs, const void *i, int64_t irs, void *d, int64_t drs, int64_t t,
                     int64_t f, fastglu_dtype dt) {
    for (int cuda = 0; cuda < 2; ++cuda) {
        poison();
        fastglu_status st =
            cuda ? fastglu_swiglu_bwd_cuda(g, grs, gcs, i, irs, d, drs, t, f, dt, NULL)
                 : fastglu_swiglu_bwd_cpu(g, grs, gcs, i, irs, d, drs, t, f, dt);
        const char *msg = fastglu_last_error_message();
        EXPECT(st == want, "case at line %d (%s): status %d, want %d (%s)", line,
               cuda ? "cuda" : "cpu", st, want, msg);
        EXPECT(strstr(msg, needle) != NULL, "case at line %d: message '%s' lacks '%s'", line, msg,
               needle);
        EXPECT(untouched(), "case at line %d: output changed", line);
    }
}

int main(void) {
    const fastglu_dtype f32 = FASTGLU_DTYPE_FP32;
    const fastglu_status INV = FASTGLU_ERROR_INVALID_VALUE;
    for (int i = 0; i < T; ++i)
        for (int j = 0; j < 2 * F; ++j) in[i][j] = (float)(i - j) * 0.25f + 0.5f;
    for (int i = 0; i < T; ++i)
        for (int j = 0; j < F; ++j) dy[i][j] = 1.0f + (float)j;

    fwd_case(__LINE__, FASTGLU_ERROR_UNSUPPORTED_DTYPE, "dtype 7", in, 2 * F, out, F, T, F,
             (fastglu_dtype)7);
    fwd_case(__LINE__, INV, "input is NULL", NULL, 2 * F, out, F, T, F, f32);
    fwd_case(__LINE__, INV, "output is NULL", in, 2 * F, NULL, F, T, F, f32);
    fwd_case(__LINE__, INV, "tokens = -1", in, 2 * F, out, F, -1, F, f32);
    fwd_case(__LINE__, INV, "ffn_hidden_size = -3", in, 2 * F, out, F, T, -3, f32);
    fwd_case(__LINE__, INV, "rows would overlap", in, 2 * F, out, F - 1, T, F, f32);
    fwd_case(__LINE__, INV, "negative stride", in, -2 * F, out, F, T, F, f32);
    fwd_case(__LINE__, INV, "not aligned", (const char *)in + 1, 2 * F, out, F, T, F, f32);
    fwd_case(__LINE__, INV, "output overlaps input", in, 2 * F, (float *)in + 4, 2 * F, T, F, f32);
    fwd_case(__LINE__, INV, "spans more than", in, INT64_MAX / 2, out, F, T, F, f32);

    bwd_case(__LINE__, INV, "dy is NULL", NULL, F, 1, in, 2 * F, din, 2 * F, T, F, f32);
    bwd_case(__LINE__, INV, "dinput overlaps dy", dy, F, 1, in, 2 * F, (float *)dy + 1, 2 * F, 2,
             F / 2, f32);
    bwd_case(__LINE__, INV, "dinput overlaps input", dy, F, 1, in, 2 * F, (float *)in + 1, 2 * F,
             T - 1, F, f32);
    bwd_case(__LINE__, INV, "dinput row stride", dy, F, 1, in, 2 * F, din, F, T, F, f32);
    bwd_case(__LINE__, INV, "dy has a negative stride", dy, F, -1, in, 2 * F, din, 2 * F, T, F,
             f32);

    fwd_case(__LINE__, INV, "past the end of the address space", (const void *)(UINTPTR_MAX - 63),
             2 * F, (void *)(UINTPTR_MAX - 63), F, T, F, f32);
    bwd_case(__LINE__, INV, "dinput overlaps input", dy, F, 1, in, 2 * F, (float *)in + 2, 2 * F, T,
             F / 2, f32); /* same row stride, rows interleaved by 2 elements: they meet */

    /* Legal: input and output interleaved in one buffer with one row stride, never sharing a byte
     * ([gate | up | y] rows of 3F/2 ... here x = buf[:, :2F'], y = buf[:, 2F':3F']). */
    {
        enum { FF = F / 2, W = 3 * FF };
        static float buf[T][W];
        for (int i = 0; i < T; ++i)
            for (int j = 0; j < W; ++j) buf[i][j] = (j < 2 * FF) ? in[i][j] : 7.0f;
        fastglu_status st = fastglu_swiglu_fwd_cpu(buf, W, &buf[0][2 * FF], W, T, FF, f32);
        EXPECT(st == FASTGLU_SUCCESS, "interleaved x and y refused: %s",
               fastglu_last_error_message());
        EXPECT(buf[1][2 * FF] != 7.0f && buf[T - 1][W - 1] != 7.0f, "interleaved y not written");
        /* dinput = buf[:, :2F'] and dy = buf[:, 2F':] likewise, for the backward */
        static float din2[T][2 * FF];
        st = fastglu_swiglu_bwd_cpu(&buf[0][2 * FF], W, 1, din2, 2 * FF, buf, W, T, FF, f32);
        EXPECT(st == FASTGLU_SUCCESS, "interleaved dinput and dy refused: %s",
               fastglu_last_error_message());
    }
    /* Legal: in place with one token, whatever the (irrelevant) row strides say. */
    EXPECT(fastglu_swiglu_bwd_cpu(dy, F, 1, din, 2 * F, din, 3 * F, 1, F, f32) == FASTGLU_SUCCESS,
           "in-place single row refused: %s", fastglu_last_error_message());

    /* Empty problems: success, nothing touched, NULL pointers allowed. */
    poison();
    EXPECT(fastglu_swiglu_fwd_cpu(NULL, 0, NULL, 0, 0, F, f32) == FASTGLU_SUCCESS, "T=0 fwd");
    EXPECT(fastglu_swiglu_bwd_cpu(NULL, 0, 0, NULL, 0, NULL, 0, T, 0, f32) == FASTGLU_SUCCESS,
           "F=0 bwd");
    EXPECT(fastglu_swiglu_fwd_cuda(NULL, 0, NULL, 0, 0, F, f32, NULL) == FASTGLU_SUCCESS,
           "T=0 fwd cuda");
    EXPECT(untouched(), "empty calls changed an output");

    /* Without a usable device (a CPU-only build, or a CUDA build on a machine with no GPU or driver),
     * a legal CUDA call says so with FASTGLU_ERROR_NO_CUDA and touches nothing. */
    if (!fastglu_cuda_available()) {
        poison();
        fastglu_status st = fastglu_swiglu_fwd_cuda(in, 2 * F, out, F, T, F, f32, NULL);
        EXPECT(st == FASTGLU_ERROR_NO_CUDA, "no device: status %d (%s)", st,
               fastglu_last_error_message());
        st = fastglu_swiglu_bwd_cuda(dy, F, 1, in, 2 * F, din, 2 * F, T, F, f32, NULL);
        EXPECT(st == FASTGLU_ERROR_NO_CUDA, "no device (bwd): status %d (%s)", st,
               fastglu_last_error_message());
        EXPECT(untouched(), "no device: an output changed");
    }

    /* A legal call succeeds and, like errno, leaves the last failure's message as it is. */
    char before[512];
    EXPECT(fastglu_swiglu_fwd_cpu(in, 2 * F, out, 0, T, F, f32) == FASTGLU_ERROR_INVALID_VALUE,
           "rows of stride 0 accepted");
    snprintf(before, sizeof before, "%s", fastglu_last_error_message());
    EXPECT(fastglu_swiglu_fwd_cpu(in, 2 * F, out, F, T, F, f32) == FASTGLU_SUCCESS, "legal fwd");
    EXPECT(strcmp(fastglu_last_error_message(), before) == 0 && before[0] != '\0',
           "a success changed the message '%s' to '%s'", before, fastglu_last_error_message());

    for (int s = 0; s <= 4; ++s)
        EXPECT(strcmp(fastglu_strerror((fastglu_status)s), "unknown fastglu status") != 0,
               "strerror(%d)", s);
    EXPECT(fastglu_version() ==
               FASTGLU_VERSION_MAJOR * 10000 + FASTGLU_VERSION_MINOR * 100 + FASTGLU_VERSION_PATCH,
           "version");
    printf("api errors: %d failed\n", failures);
    return failures ? 1 : 0;
}
