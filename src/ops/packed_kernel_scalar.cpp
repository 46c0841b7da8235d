// The packed-weight GEMM in portable C++ for either layout (8 or 16 floats per vector): the
// kernels of CPUs without AVX2 (DLLMQ_ISA=scalar forces them), and the twin the vector kernels
// are tested against on the packed data itself. Each lane is std::fmaf, so the bits are those of
// the vector kernels by definition of FMA (one rounding per step).
#include <cmath>
#include <cstring>

#include "ops/packed_kernel.h"
#include "ops/packed_kernel_impl.h"
#include "util/half.h"

namespace dllmq::kern {
namespace {

template <int L, int kRows>
struct Scalar {
  static constexpr int W = L;
  static constexpr int MR = kRows;
  // The k loop of ops/packed_kernel_impl.h (either form gives the same bits; speed not tuned).
  static constexpr int kStepsPerWalk = 4;
  static constexpr bool kPeelTurns = true;
  struct R {
    float v[L];
  };
  struct RI {
    int32_t v[L];
  };
  static R zero() { return R{}; }
  static R bcast(const float* p) {
    R r;
    for (float& x : r.v) x = *p;
    return r;
  }
  static R fma(R a, R b, R c) {
    for (int i = 0; i < L; ++i) c.v[i] = std::fmaf(a.v[i], b.v[i], c.v[i]);
    return c;
  }
  static R load(const float* p) {
    R r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static void store(float* p, R v) { std::memcpy(p, v.v, sizeof(v.v)); }
  static void bf16_pair(const uint16_t* p, R& lo, R& hi) {
    for (int i = 0; i < L; ++i) {
      lo.v[i] = bf16_to_f32(p[2 * i]);
      hi.v[i] = bf16_to_f32(p[2 * i + 1]);
    }
  }
  static R f16(const uint16_t* p) {
    R r;
    for (int i = 0; i < L; ++i) r.v[i] = f16_to_f32(p[i]);
    return r;
  }
  static RI loadi(const int32_t* p) {
    RI r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static void codes8(const unsigned char* p, RI& lo, RI& hi) {
    for (int i = 0; i < L; ++i) {
      lo.v[i] = p[i];
      hi.v[i] = p[L + i];
    }
  }
  static void codes4(const unsigned char* p, RI& lo, RI& hi) {
    for (int i = 0; i < L; ++i) {
      lo.v[i] = p[i] & 15;
      hi.v[i] = p[i] >> 4;
    }
  }
  static void codes8s(const unsigned char* p, RI& lo, RI& hi) {
    for (int i = 0; i < L; ++i) {
      lo.v[i] = int8_t(p[i]);
      hi.v[i] = int8_t(p[L + i]);
    }
  }
  // Signed nibbles: the low one moved to the top of a byte, then both shifted down arithmetically.
  static void codes4s(const unsigned char* p, RI& lo, RI& hi) {
    for (int i = 0; i < L; ++i) {
      lo.v[i] = int8_t(uint8_t(p[i] << 4)) >> 4;
      hi.v[i] = int8_t(p[i]) >> 4;
    }
  }
  static RI subi(RI a, RI b) {
    for (int i = 0; i < L; ++i) a.v[i] -= b.v[i];
    return a;
  }
  static R cvt(RI a) {
    R r;
    for (int i = 0; i < L; ++i) r.v[i] = float(a.v[i]);
    return r;
  }
  static R round_bf16(R x) {
    for (float& f : x.v) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
      std::memcpy(&f, &u, 4);
    }
    return x;
  }
};

}  // namespace

void gemm_scalar8(const GemmArgs& a) {
  run_gemm<Scalar<8, 6>>(a);
}

void gemm_scalar16(const GemmArgs& a) {
  run_gemm<Scalar<16, 8>>(a);
}

}  // namespace dllmq::kern
