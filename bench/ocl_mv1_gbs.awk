# Weight bytes and GB/s of each one-row decode launch (mv1x_r*) from an OpenCL device
# profile: the profile names each launch by its form and weights ("mv1x_r2 norm gate+up q4k
# 5632x2048"), so a decode run gives one row per matvec of the step.
#   CTORCH_OPENCL_PROFILE=1 ctorch bench -m MODEL.gguf -d opencl,cpu -p 0 -n 128 -r 1 2>&1 |
#     awk -f bench/ocl_mv1_gbs.awk
# GB/s counts the weight bytes only (x and the outputs are a few KiB); "of copy" against the
# H100's device copy, 2888 GB/s (bench/bandwidth.c); rows with fewer than 100 calls are left
# out (the prompt's and warm-up's).
# H100, NVIDIA's OpenCL, TinyLlama-shaped Q4_K_M, main 72d5c48 -> ocl7 (2 rows per group):
#   norm + gate/up q4k 5632x2048 (13.0 MB)  15.98 us (main, all launches) -> 19.0-20.9 us 622-684 GB/s
#   o + add q4k 2048x2048 (2.4 MB)          8.0 us 294 GB/s; down + add 11.3 us 576 GB/s (Q4_K),
#   12.0 us 784 GB/s (Q6_K); norm + q/k/v 11.5-13.7 us ~250 GB/s; output q6k 32000x2048 44 us 1218 GB/s
/mv1x_r/ {
  line = $0; bytes = 0
  while (match(line, /q[46]k [0-9]+x[0-9]+/)) {
    t = substr(line, RSTART, RLENGTH); split(t, a, /[ x]/)
    bytes += a[2] * (a[3] / 256) * (a[1] == "q4k" ? 144 : 210)
    line = substr(line, RSTART + RLENGTH)
  }
  if (index($0, "gate+up")) bytes *= 2
  n = split($0, f, /[ \t]+/); avg = f[n - 2]; calls = f[n - 4]
  lab = $0; sub(/ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ *$/, "", lab); sub(/^ +/, "", lab)
  if (calls + 0 >= 100) printf "  %-60s %6.2f us %6.1f MB %5.0f GB/s (%4.1f%% of copy)\n", lab, avg, bytes / 1e6, bytes / avg / 1e3, bytes / avg / 1e3 / 28.88
}
