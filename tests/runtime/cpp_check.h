// The check of the runtime's C++ tests (tests/runtime/*_test.cpp), which build against the C++
// standard library and the seam only, so without a test framework: each failed CHECK prints its
// line, and main() reports the counts and exits 1 on any failure.
#pragma once

#include <cstdio>

namespace seam_test {

inline int g_failures = 0;
inline int g_checks = 0;

// "N checks, M failed" (what tests/runtime/test_seam.py reads); the exit status of main().
inline int report() {
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace seam_test

#define CHECK(cond)                                                        \
  do {                                                                     \
    ++seam_test::g_checks;                                                 \
    if (!(cond)) {                                                         \
      ++seam_test::g_failures;                                             \
      std::printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
    }                                                                      \
  } while (0)
