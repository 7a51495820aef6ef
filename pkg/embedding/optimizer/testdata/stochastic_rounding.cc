// Writes what the reference's float16 stochastic rounding computes, for pkg/embedding/optimizer's
// tests: its stochastic_round, its multiply-with-carry rand() and half.hpp's directed float2half,
// copied from monolith/native_training/runtime/hash_table/optimizer/stochastic_rounding.h (upstream
// 135c491). Build with the reference's third_party/half_sourceforge_net/half.hpp:
//   git -C <monolith> show HEAD:third_party/half_sourceforge_net/half.hpp > /tmp/sr/half.hpp
//   g++ -O2 -std=c++17 -ffp-contract=off -I/tmp/sr stochastic_rounding.cc -o /tmp/sr/sr
//   /tmp/sr/sr > stochastic_rounding.txt
// Floats are written as their bits in hex.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "half.hpp"

static uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float from(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float stochastic_round(float vf, float p) {
  unsigned int half_up = half_float::detail::float2half<std::round_toward_infinity>(vf);
  unsigned int half_down = half_float::detail::float2half<std::round_toward_neg_infinity>(vf);
  float vf_up = half_float::detail::half2float<float>(half_up);
  float vf_down = half_float::detail::half2float<float>(half_down);
  if (p <= (vf - vf_down) / (vf_up - vf_down)) {
    return vf_up;
  } else {
    return vf_down;
  }
}

static std::vector<uint64_t> rng_ = {0, 1};
static void update_rng() {
  rng_[0] = (36969 * (rng_[0] & 65535) + (rng_[0] >> 16)) & 4294967295;
  rng_[1] = (18000 * (rng_[1] & 65535) + (rng_[1] >> 16)) & 4294967295;
}
static float rand_() {
  update_rng();
  return static_cast<float>((((rng_[0] & 65535) << 16) + rng_[1]) & 4294967295) / 4294967296;
}

int main() {
  std::vector<float> values = {0.f, -0.f, 1.f, -1.f, 1.0005f, 0.1f, -0.1f, 65504.f, 65519.f, 65520.f,
                               70000.f, -70000.f, 1e-8f, -1e-8f, 3e-8f, 5.9604645e-08f, 6.1e-5f,
                               6.103515625e-05f, 6.09e-5f, -6.09e-5f, 3.14159274f, 1000.3f, 2049.5f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::max(), 1.4e-45f};
  uint32_t x = 12345;
  for (int i = 0; i < 400; ++i) {  // random bits over exponents -30..20, both signs
    x = x * 1664525u + 1013904223u;
    uint32_t exp = 97 + (x >> 8) % 51;
    uint32_t u = (x & 0x80000000u) | (exp << 23) | ((x * 2654435761u) & 0x7fffffu);
    values.push_back(from(u));
  }
  for (float v : values) {
    float up = half_float::detail::half2float<float>(
        half_float::detail::float2half<std::round_toward_infinity>(v));
    float down = half_float::detail::half2float<float>(
        half_float::detail::float2half<std::round_toward_neg_infinity>(v));
    float p = rand_();
    std::printf("%08x %08x %08x %08x %08x\n", bits(v), bits(down), bits(up), bits(p),
                bits(stochastic_round(v, p)));
  }
}
