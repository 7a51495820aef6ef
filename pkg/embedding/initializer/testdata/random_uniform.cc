// Writes the values the reference's RandomUniformInitializer draws (std::mt19937, default seed,
// std::uniform_real_distribution<float>), for pkg/embedding/initializer's tests:
//   g++ -O2 -std=c++17 -ffp-contract=off random_uniform.cc -o /tmp/ru && /tmp/ru > random_uniform.txt
// Each line: minval maxval then the values, float32 as %.9g; the last lines check
// generate_canonical at the top of the 32-bit range.
#include <cstdint>
#include <cstdio>
#include <random>

struct Fixed {  // a URNG that returns one value
  using result_type = uint32_t;
  uint32_t v;
  static constexpr uint32_t min() { return 0; }
  static constexpr uint32_t max() { return 0xffffffffu; }
  uint32_t operator()() { return v; }
};

int main() {
  std::mt19937 generator;  // one stream for all configs, as the reference's thread_local
  const float ranges[][2] = {{-0.05f, 0.05f}, {-1.f, 1.f}, {0.f, 3.f}, {-1e-4f, 2.5f}};
  for (const auto& r : ranges) {
    std::uniform_real_distribution<float> d(r[0], r[1]);
    std::printf("%.9g %.9g", r[0], r[1]);
    for (int i = 0; i < 40; ++i) std::printf(" %.9g", d(generator));
    std::printf("\n");
  }
  std::printf("mt19937 10000th:");
  std::mt19937 g2;
  uint32_t x = 0;
  for (int i = 0; i < 10000; ++i) x = g2();
  std::printf(" %u\n", x);
  const uint32_t tops[] = {0u, 1u, 0x7fffffffu, 0xffffff7fu, 0xffffff80u, 0xffffffffu};
  for (uint32_t t : tops) {
    Fixed f{t};
    std::printf("canonical %u %.9g\n", t, std::generate_canonical<float, 24>(f));
  }
}
