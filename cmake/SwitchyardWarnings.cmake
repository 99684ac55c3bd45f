# Warnings are errors in our own code; third-party headers come in as SYSTEM includes.
# -Wno-restrict: GCC 12 at -O3 reports false overlaps inside libstdc++'s std::string
# (GCC bug 105329), in code that only concatenates strings.
function(sy_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror>)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  endif()
endfunction()
