# Warnings are errors for the project's own code (not for third-party headers).
add_compile_options(-Wall -Wextra -Werror -Wno-missing-field-initializers)
# g++ 12 reports false -Wrestrict positives inside std::string's operator+ (GCC bug 105651).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  add_compile_options(-Wno-restrict)
endif()
