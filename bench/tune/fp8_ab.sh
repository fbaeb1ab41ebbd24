#!/bin/bash
# A/B of the FP8 GLU kernels: fp8_prof_<name> binaries (bench/tune/fp8_prof.cu, each built on the
# CPU host against one version of src/glu_fp8_cuda.cu; cudart linked statically, needs only the
# driver) in 4 rounds, the order rotated and reversed; bf16, T = 8192, F = 2880, 8192, 14336.
# Prints per F and case the median over the rounds per binary, its ratio to the floor (bytes read
# and written, scales included, over the same process's 1 GiB copy bandwidth; per-tensor cases
# read the operands twice), its ratio to main, and the largest spread (max-min)/median.
#   bash bench/tune/fp8_ab.sh DIR [NAME ...]   (DIR holds fp8_prof_<NAME>; the first NAME is the
#                                               base; default names: main wide wrb2 narrow)
# Raw lines and the table also go to $OUT if set.
D=$(cd "${1:?the folder of the fp8_prof_<name> binaries}" && pwd)
shift
if [ $# -gt 0 ]; then BINS=("$@"); else BINS=(main wide wrb2 narrow); fi
NB=${#BINS[@]}
# round r: the binaries rotated by r, reversed in odd rounds (no binary always follows the same one)
ORDERS=()
for r in 0 1 2 3; do
  o=""
  for k in $(seq 0 $((NB - 1))); do o="$o $(((k + r) % NB))"; done
  [ $((r % 2)) = 1 ] && o=$(echo $o | tr ' ' '\n' | tac | tr '\n' ' ')
  ORDERS+=("$o")
done
RAW=${OUT:-/tmp}/fp8ab_raw.txt
: > "$RAW"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null | tee -a "$RAW"
for r in 0 1 2 3; do
  for i in ${ORDERS[$r]}; do
    b=${BINS[$i]}
    "$D/fp8_prof_$b" 2880 8192 14336 | sed "s/^/$b $r | /" >> "$RAW"
  done
done
echo "runs ending 'cuda: no error': $(grep -c 'cuda: no error' "$RAW") of $((4 * NB))"
grep -v -e 'cuda: no error' -e ' | F [0-9]' "$RAW" | tail -n +2
awk -F'|' -v bins="${BINS[*]}" '
function med(s,   a, n, i, j, t) {
  n = split(s, a, " ");
  for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2;
}
function mx(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
function mn(s,   a, n, i, m) { n = split(s, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
NF >= 5 && $2 ~ /^ *F [0-9]+/ {
  split($1, h, " "); b = h[1];
  split($2, f, " "); F = f[2];
  c = $3; gsub(/^ +| +$/, "", c);
  split($4, m, " "); split($5, fl, " ");
  k = F SUBSEP c;
  if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
  t[k, b] = t[k, b] " " m[1]; fls[k] = fls[k] " " fl[2];
  split($6, cp, " "); cps = cps " " cp[2];
}
END {
  nb = split(bins, B, " ");
  printf "copy bandwidth (median of all processes): %.3f TB/s; ms = median of 4 rounds\n", med(cps);
  printf "%-6s %-18s %8s", "F", "case", "floor";
  for (i = 1; i <= nb; i++) printf " | %-8s %5s %5s", B[i], "xfl", "/main";
  printf " | spread\n";
  for (q = 1; q <= nk; q++) {
    k = keys[q]; split(k, kk, SUBSEP);
    fm = med(fls[k]); base = med(t[k, B[1]]); sp = 0;
    printf "%-6s %-18s %8.4f", kk[1], kk[2], fm;
    for (i = 1; i <= nb; i++) {
      v = med(t[k, B[i]]);
      printf " | %8.4f %5.2f %5.3f", v, v / fm, v / base;
      s = (mx(t[k, B[i]]) - mn(t[k, B[i]])) / v; if (s > sp) sp = s;
    }
    printf " | %4.1f%%\n", 100 * sp;
  }
}' "$RAW" | tee "${OUT:-/tmp}/fp8ab_table.txt"
