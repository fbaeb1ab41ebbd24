// test_header_cxx.cpp — fastglu.h compiles as C++ and its functions link with C linkage.
#include <cstdio>
#include <cstring>

#include "fastglu.h"

int main() {
    const bool ok = fastglu_version() == FASTGLU_VERSION_MAJOR * 10000 +
                                             FASTGLU_VERSION_MINOR * 100 + FASTGLU_VERSION_PATCH &&
                    std::strcmp(fastglu_strerror(FASTGLU_SUCCESS), "success") == 0 &&
                    fastglu_dtype_size(FASTGLU_DTYPE_BF16) == 2;
    std::printf("header as C++: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
