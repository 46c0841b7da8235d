# Debian packages, sourced by scripts/build_dllmq.sh (runtime) and scripts/setup.sh (both lists).
# libdnnl-dev: oneDNN, the GEMM backend that JIT-compiles for the CPU's instruction set.
# libcpp-httplib-dev: dllmq serve's HTTP server.
RUNTIME_PKGS=(cmake g++ make pkg-config libopenblas-openmp-dev libdnnl-dev nlohmann-json3-dev
              libfmt-dev libcli11-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev)
# The test command's: GoogleTest/Benchmark, numpy + matplotlib (references, plots), scipy (the frontier
# test's independent McNemar reference), chromium (the
# headless test of the server's page), dpkg-dev (dpkg-shlibdeps, for the Debian package test).
TEST_PKGS=(libgtest-dev libgmock-dev libbenchmark-dev python3 python3-numpy python3-matplotlib python3-scipy
           chromium dpkg-dev)
