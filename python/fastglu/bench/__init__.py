"""fastglu's benchmark: ``python -m fastglu.bench --help``.

``swiglu`` times SwiGLU providers with the seed's protocol and writes records; ``records`` builds the
kernelindex.dev/v1alpha1 records; ``report`` turns a run's summary.json into plots and tables.
"""
