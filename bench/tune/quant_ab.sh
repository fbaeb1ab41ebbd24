#!/bin/bash
# A/B of the plain operand's FP8 quantiser: quant_prof_<name> binaries (bench/tune/quant_prof.cu,
# each built on the CPU host against one version of src/quant_fp8_cuda.cu) in 4 rounds, the order
# rotated and reversed. Prints per case the median over the rounds per binary, its ratio to the
# floor and to the first binary, and the largest spread (max - min) / median.
#   bash bench/tune/quant_ab.sh DIR NAME ...   (DIR holds quant_prof_<NAME>; the first is the base)
D=$(cd "${1:?the folder of the quant_prof_<name> binaries}" && pwd)
shift
BINS=("$@")
NB=${#BINS[@]}
RAW=${OUT:-/tmp}/quant_ab_raw.txt
: > "$RAW"
for r in 0 1 2 3; do
  o=""
  for k in $(seq 0 $((NB - 1))); do o="$o $(((k + r) % NB))"; done
  [ $((r % 2)) = 1 ] && o=$(echo $o | tr ' ' '\n' | tac | tr '\n' ' ')
  for i in $o; do
    b=${BINS[$i]}
    "$D/quant_prof_$b" | grep ' | ' | sed "s/^/$b | /" >> "$RAW"
  done
done
python3 - "$RAW" "${BINS[@]}" <<'PY'
import statistics, sys, collections
raw, bins = sys.argv[1], sys.argv[2:]
t = collections.defaultdict(list); floor = {}
for line in open(raw):
    b, case, ms, fl, _ = [f.strip() for f in line.split("|")]
    t[(case, b)].append(float(ms)); floor[case] = float(fl)
cases = list(dict.fromkeys(c for c, _ in t))
print(f"{'case':>22s} " + " ".join(f"{b + ' ms':>10s} {'x floor':>7s} {'/base':>6s}" for b in bins) + "  spread")
for c in cases:
    base = statistics.median(t[(c, bins[0])])
    cells, spread = [], 0
    for b in bins:
        v = t[(c, b)]; m = statistics.median(v); spread = max(spread, (max(v) - min(v)) / m)
        cells.append(f"{m:10.4f} {m / floor[c]:7.3f} {m / base:6.3f}")
    print(f"{c:>22s} " + " ".join(cells) + f"  {spread:.3f}")
PY
