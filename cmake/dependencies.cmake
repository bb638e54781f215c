# Third-party dependencies, all from Debian 12 packages (scripts/setup installs them).
find_package(Boost 1.81 REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
# libcrypto for the handshake's HMAC, linked statically like spdlog/fmt are header-only: the
# binaries are carried to machines that have no Debian packages.
set(OPENSSL_USE_STATIC_LIBS TRUE)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)

# hwloc (libhwloc-dev) for binding: linked statically where libhwloc.a and the libudev.so.1 it
# needs are found (every systemd machine has libudev.so.1; the binaries are carried to machines
# without Debian packages), else the shared library, which must then be on the running machine.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
find_library(COHORT_HWLOC_STATIC NAMES libhwloc.a HINTS ${HWLOC_LIBRARY_DIRS})
find_library(COHORT_UDEV_SHARED NAMES libudev.so libudev.so.1)
add_library(cohort_hwloc INTERFACE)
if(COHORT_HWLOC_STATIC AND COHORT_UDEV_SHARED)
  target_include_directories(cohort_hwloc INTERFACE ${HWLOC_INCLUDE_DIRS})
  target_link_libraries(cohort_hwloc INTERFACE ${COHORT_HWLOC_STATIC} ${COHORT_UDEV_SHARED} m
                        Threads::Threads)
  message(STATUS "hwloc: static (${COHORT_HWLOC_STATIC})")
else()
  target_link_libraries(cohort_hwloc INTERFACE PkgConfig::HWLOC)
  message(STATUS "hwloc: shared; the binaries need libhwloc where they run")
endif()

# liburing (liburing-dev) for the worker store's io_uring loop, linked statically: the binaries are
# carried to machines without Debian packages. Where the kernel has no io_uring the loop is not
# used (common/uring_loop.hpp), so the library is always linked.
find_path(COHORT_LIBURING_INCLUDE NAMES liburing.h)
find_library(COHORT_LIBURING_STATIC NAMES liburing.a)
if(NOT COHORT_LIBURING_INCLUDE OR NOT COHORT_LIBURING_STATIC)
  message(FATAL_ERROR "liburing.a and liburing.h not found: install liburing-dev (scripts/setup)")
endif()
add_library(cohort_liburing INTERFACE)
target_include_directories(cohort_liburing INTERFACE ${COHORT_LIBURING_INCLUDE})
target_link_libraries(cohort_liburing INTERFACE ${COHORT_LIBURING_STATIC})

# spdlog and fmt are used header-only so that the binaries need no shared library beyond glibc,
# libgcc_s and libudev (they are carried to GPU machines that have no Debian packages).
add_library(cohort_spdlog INTERFACE)
target_compile_definitions(cohort_spdlog INTERFACE SPDLOG_HEADER_ONLY FMT_HEADER_ONLY)

# Prove at configure time that this Boost has Asio C++20 coroutines.
if(NOT DEFINED COHORT_BOOST_PROBE_OK)
  try_run(probe_run probe_compiles ${CMAKE_BINARY_DIR}/boost_probe
          ${CMAKE_SOURCE_DIR}/cmake/probes/boost_probe.cpp
          CMAKE_FLAGS -DINCLUDE_DIRECTORIES=${Boost_INCLUDE_DIRS}
          CXX_STANDARD 20
          LINK_LIBRARIES Threads::Threads
          COMPILE_OUTPUT_VARIABLE probe_compile_log
          RUN_OUTPUT_VARIABLE probe_run_log)
  if(NOT probe_compiles OR NOT probe_run EQUAL 0)
    message(FATAL_ERROR "Boost probe failed (compiles=${probe_compiles} run=${probe_run}):\n"
                        "${probe_compile_log}\n${probe_run_log}")
  endif()
  message(STATUS "${probe_run_log}")
  set(COHORT_BOOST_PROBE_OK TRUE CACHE INTERNAL "")
endif()

find_package(Torch QUIET PATHS /usr/lib/x86_64-linux-gnu/cmake/Torch)
