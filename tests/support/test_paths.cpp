#include "tests/support/test_paths.hpp"

namespace cohort::test {

const char* const kCohortBin = COHORT_TEST_COHORT_BIN;
const char* const kCohortdBin = COHORT_TEST_COHORTD_BIN;
const char* const kTestWorkerBin = COHORT_TEST_WORKER_BIN;
const char* const kSourceDir = COHORT_TEST_SOURCE_DIR;
const char* const kFakeNvmlLibrary = COHORT_TEST_FAKE_NVML;
const char* const kWithoutIoUringBin = COHORT_TEST_WITHOUT_IO_URING_BIN;

}  // namespace cohort::test
