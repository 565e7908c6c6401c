# napkin_set_warnings(target): the one place compiler warnings are chosen.
function(napkin_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
                                           -Wconversion -Wno-sign-conversion)
  if(NAPKIN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
