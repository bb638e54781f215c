# Compiles through ccache when it is installed (scripts/setup installs it), so that a fresh clone
# of the same sources, in any folder of this machine, takes what an earlier build compiled
# instead of compiling the tree again: CI's clone after a session's build, a clean-clone test.
# The checkout is ccache's base_dir (paths inside it are hashed relative to the build folder) and
# the build folder itself is not hashed: it reaches only the debug information's compile folder.
# -DCOHORT_CCACHE=OFF compiles without it.
option(COHORT_CCACHE "Compile through ccache when it is installed" ON)
find_program(COHORT_CCACHE_PROGRAM ccache)
if(COHORT_CCACHE AND COHORT_CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}
      CCACHE_NOHASHDIR=true ${COHORT_CCACHE_PROGRAM})
  message(STATUS "compiler cache: ${COHORT_CCACHE_PROGRAM}")
endif()
