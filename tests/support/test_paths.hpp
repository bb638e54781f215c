// Absolute paths of the binaries and sources the tests use, set by CMake at build time (in
// test_paths.cpp only, so that every other test file compiles the same in any checkout), so the
// tests run from any directory.
#pragma once

namespace cohort::test {

extern const char* const kCohortBin;
extern const char* const kCohortdBin;
extern const char* const kTestWorkerBin;
extern const char* const kSourceDir;
extern const char* const kFakeNvmlLibrary;    ///< tests/helpers/fake_nvml.cpp
extern const char* const kWithoutIoUringBin;  ///< tests/helpers/without_io_uring.cpp

}  // namespace cohort::test
