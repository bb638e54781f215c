// Absolute paths of the binaries and sources the tests use, set by CMake at build time, so the
// tests run from any directory.
#pragma once

namespace cohort::test {

inline constexpr const char* kCohortBin = COHORT_TEST_COHORT_BIN;
inline constexpr const char* kCohortdBin = COHORT_TEST_COHORTD_BIN;
inline constexpr const char* kTestWorkerBin = COHORT_TEST_WORKER_BIN;
inline constexpr const char* kSourceDir = COHORT_TEST_SOURCE_DIR;

}  // namespace cohort::test
