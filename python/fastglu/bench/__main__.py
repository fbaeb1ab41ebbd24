"""python -m fastglu.bench: see fastglu.bench.swiglu."""
from .swiglu import main

main()
