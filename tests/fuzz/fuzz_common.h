/*
 * fuzz_common.h — what the libFuzzer harness (fuzz_glu.c) uses: the byte reader
 * that turns an input into choices, the span of a strided region, and the driver of a build
 * without libFuzzer (FASTGLU_FUZZ_STANDALONE: random inputs for a bounded time).
 */
#ifndef FASTGLU_FUZZ_COMMON_H
#define FASTGLU_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

/* The input's next byte, or 0 once it is used up. */
static unsigned next(reader *r) {
    if (r->n == 0) return 0;
    r->n--;
    return *r->p++;
}

/* Elements spanned by [rows, cols] with strides (rs, cs), or 0 for an empty or negative one. */
static int64_t span(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    if (rows <= 0 || cols <= 0 || rs < 0 || cs < 0) return 0;
    return (rows - 1) * rs + (cols - 1) * cs + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FASTGLU_FUZZ_STANDALONE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Runs the harness on random inputs of min_len .. cap - 1 bytes (a 64-bit LCG from the seed, argv[2]
 * or the time) for argv[1] seconds (default 10); prints the seed first; returns the inputs run. */
static long fuzz_standalone(const char *name, int argc, char **argv, uint8_t *buf, size_t cap,
                            size_t min_len) {
    const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    uint64_t s = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
    printf("%s: %.0f s, seed %llu\n", name, seconds, (unsigned long long)s);
    const clock_t end = clock() + (clock_t)(seconds * CLOCKS_PER_SEC);
    long runs = 0;
    while (clock() < end) {
        size_t n = min_len + (size_t)(s >> 33) % (cap - min_len);
        for (size_t i = 0; i < n; ++i) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (uint8_t)(s >> 56);
        }
        LLVMFuzzerTestOneInput(buf, n);
        runs++;
    }
    return runs;
}
#endif

#endif /* FASTGLU_FUZZ_COMMON_H */
