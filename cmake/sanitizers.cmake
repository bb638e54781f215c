# COHORT_SANITIZE=address builds with ASan+UBSan, =thread with TSan.
# g++ 12 reports false -Wmaybe-uninitialized positives in sanitizer builds (Catch2's main).
if(NOT COHORT_SANITIZE STREQUAL "" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-maybe-uninitialized)
endif()
if(COHORT_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(COHORT_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Asio's fenced blocks use std::atomic_thread_fence, which g++ warns TSan does not model;
    # cohort's io threads share no state through them.
    add_compile_options(-Wno-tsan)
  endif()
  add_link_options(-fsanitize=thread)
elseif(NOT COHORT_SANITIZE STREQUAL "")
  message(FATAL_ERROR "COHORT_SANITIZE must be '', 'address' or 'thread', not '${COHORT_SANITIZE}'")
endif()
