# Line tables only (-g1) in optimised and sanitizer builds: backtraces, perf and the sanitizers'
# reports keep their file:line, and a cold build takes about a quarter less time (full -g of
# Asio's templates is 30% of an optimised compile). A plain Debug build keeps full -g for gdb.
if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo" OR NOT COHORT_SANITIZE STREQUAL "")
  add_compile_options(-g1)
endif()
