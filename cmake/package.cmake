# CPack: scripts/package makes a Debian package (cohort_<version>_amd64.deb) and a .tar.gz of the
# same install tree (cmake/install.cmake). The binaries carry Boost, OpenSSL, hwloc, fmt, spdlog
# and libstdc++ statically; what they need from the system is glibc 2.34 or later, libgcc_s and
# libudev (hwloc's) (launcher/CMakeLists.txt, scripts/check-shared-libraries).
set(CPACK_PACKAGE_NAME cohort)
set(CPACK_PACKAGE_VENDOR "cohort")
set(CPACK_PACKAGE_CONTACT "cohort developers <cohort@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "launcher for distributed PyTorch and LibTorch training, a drop-in for torchrun")
if(NOT COHORT_PACKAGE_VERSION)
  set(COHORT_PACKAGE_VERSION ${PROJECT_VERSION})
endif()
set(CPACK_PACKAGE_VERSION ${COHORT_PACKAGE_VERSION})
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_FILE_NAME "cohort_${COHORT_PACKAGE_VERSION}_amd64")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34), libgcc-s1, libudev1")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
# Removes the bytecode Python leaves beside cohort_heartbeat.py (packaging/deb/prerm).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/deb/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY OFF)  # the tarball unpacks to bin/, share/, ...; the .deb to /usr
include(CPack)
