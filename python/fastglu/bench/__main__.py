"""python -m fastglu.bench: see fastglu.bench.swiglu. It needs torch and fastglu only; a module it
cannot import (an optional one, for example triton on a GPU) is named in one line with the extra that
brings the benchmark's tools."""

import sys

try:
    from .swiglu import main

    main()
except ModuleNotFoundError as e:
    sys.exit(
        f'python -m fastglu.bench: no module named {e.name!r}; pip install "fastglu[bench]" '
        "brings the benchmark's optional tools"
    )
