/* test_last_error.c — fastglu_last_error_message() is what include/fastglu.h says: the message of
 * the last failed call on this thread ("" on a thread where none has failed), which a successful
 * call of any entry point (SwiGLU and the gated-linear-unit family, CPU and CUDA, a real problem or
 * an empty one) leaves as it is, and the next failure replaces; another thread's failures do not
 * reach it. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fastglu.h"
#include "glu_flat.h"

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

enum { T = 3, F = 5 };
static float in[T][2 * F], out[T][F], dy[T][F], din[T][2 * F], dbias[2 * F];
static unsigned char ws[4096] __attribute__((aligned(16)));

static const fastglu_dtype f32 = FASTGLU_DTYPE_FP32;

/* The legal calls: each must succeed and leave the message as it is. */
static fastglu_status legal_call(int i) {
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const size_t wsb = fastglu_glu_bwd_workspace_bytes(T, F, 1, 0);
    switch (i) {
    case 0: return fastglu_swiglu_fwd_cpu(in, 2 * F, out, F, T, F, f32);
    case 1: return fastglu_swiglu_bwd_cpu(dy, F, 1, in, 2 * F, din, 2 * F, T, F, f32);
    case 2:
        return glu_fwd_cpu_flat(&p, in, 2 * F, &in[0][F], 2 * F, NULL, NULL, f32, 0, out, F, NULL,
                                0, T, F, f32);
    case 3:
        return wsb > sizeof ws
                   ? FASTGLU_ERROR_INVALID_VALUE
                   : glu_bwd_cpu_flat(&p, dy, F, 1, in, 2 * F, &in[0][F], 2 * F, f32, NULL, 0, 0,
                                      &in[1][0], NULL, f32, 0, din, 2 * F, &din[0][F], 2 * F, dbias,
                                      NULL, ws, sizeof ws, T, F, f32);
    case 4: return fastglu_swiglu_fwd_cpu(NULL, 0, NULL, 0, 0, F, f32);        /* empty */
    case 5: return fastglu_swiglu_fwd_cuda(NULL, 0, NULL, 0, 0, F, f32, NULL); /* empty, cuda */
    case 6:
        return glu_fwd_cuda_flat(&p, NULL, 0, NULL, 0, NULL, NULL, f32, 0, NULL, 0, NULL, 0, T, 0,
                                 f32, NULL); /* empty, cuda */
    }
    return FASTGLU_SUCCESS;
}
enum { LEGAL_CALLS = 7 };

static void fail_swiglu(void) { /* rows of stride 0 in the output: refused */
    EXPECT(fastglu_swiglu_fwd_cpu(in, 2 * F, out, 0, T, F, f32) == FASTGLU_ERROR_INVALID_VALUE,
           "swiglu fwd with an output row stride 0 accepted");
}

static void fail_glu(void) { /* an unknown activation: refused */
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    p.activation = (fastglu_activation)7;
    EXPECT(glu_fwd_cpu_flat(&p, in, 2 * F, &in[0][F], 2 * F, NULL, NULL, f32, 0, out, F, NULL, 0, T,
                            F, f32) == FASTGLU_ERROR_INVALID_VALUE,
           "glu fwd with activation 7 accepted");
}

static void *other_thread(void *arg) {
    char *seen = arg;
    snprintf(seen, 512, "%s", fastglu_last_error_message()); /* a fresh thread: "" */
    fail_glu();                                              /* its own failure */
    return NULL;
}

int main(void) {
    char first[512], second[512], seen[512];
    for (int t = 0; t < T; ++t)
        for (int j = 0; j < 2 * F; ++j) in[t][j] = 0.25f * (float)(t - j) + 0.125f;
    for (int t = 0; t < T; ++t)
        for (int j = 0; j < F; ++j) dy[t][j] = 0.5f + (float)j;

    EXPECT(fastglu_last_error_message()[0] == '\0', "message '%s' before any call",
           fastglu_last_error_message());
    for (int i = 0; i < LEGAL_CALLS; ++i) {
        fastglu_status st = legal_call(i);
        EXPECT(st == FASTGLU_SUCCESS, "legal call %d: status %d (%s)", i, st,
               fastglu_last_error_message());
        EXPECT(fastglu_last_error_message()[0] == '\0',
               "legal call %d before any failure: message '%s'", i, fastglu_last_error_message());
    }

    fail_swiglu();
    snprintf(first, sizeof first, "%s", fastglu_last_error_message());
    EXPECT(strstr(first, "fastglu_swiglu_fwd_cpu") && strstr(first, "output"),
           "the failure's message '%s' names neither the call nor the argument", first);
    for (int i = 0; i < LEGAL_CALLS; ++i) {
        fastglu_status st = legal_call(i);
        EXPECT(st == FASTGLU_SUCCESS, "legal call %d: status %d", i, st);
        EXPECT(strcmp(fastglu_last_error_message(), first) == 0,
               "legal call %d after a failure changed its message '%s' to '%s'", i, first,
               fastglu_last_error_message());
    }

    fail_glu(); /* the next failure replaces it */
    snprintf(second, sizeof second, "%s", fastglu_last_error_message());
    EXPECT(strstr(second, "fastglu_glu_fwd_cpu") && strstr(second, "activation"),
           "the second failure's message is '%s'", second);

    pthread_t th;
    seen[0] = 'x', seen[1] = '\0';
    EXPECT(pthread_create(&th, NULL, other_thread, seen) == 0, "pthread_create");
    pthread_join(th, NULL);
    EXPECT(seen[0] == '\0', "a fresh thread sees '%s'", seen);
    EXPECT(strcmp(fastglu_last_error_message(), second) == 0,
           "another thread's failure changed this thread's message to '%s'",
           fastglu_last_error_message());

    if (failures)
        printf("%d failures\n", failures);
    else
        printf("last_error: errno-like message, per thread\n");
    return failures ? 1 : 0;
}
