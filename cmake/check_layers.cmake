# Fails when a file under src/<layer>/ includes a header of a layer above
# its own: `#include "<other>/..."` where <other> comes later in LT_LAYERS.
# Run by the build (src/CMakeLists.txt, target lt_check_layers):
#   cmake -DLT_SRC=<src dir> -DLT_LAYERS="core;ops;...;cli" -P check_layers.cmake
if(NOT LT_SRC OR NOT LT_LAYERS)
  message(FATAL_ERROR "check_layers.cmake needs -DLT_SRC=... and -DLT_LAYERS=...")
endif()

set(_errors "")
list(LENGTH LT_LAYERS _count)
math(EXPR _last "${_count} - 1")
foreach(_rank RANGE ${_last})
  list(GET LT_LAYERS ${_rank} _layer)
  file(GLOB_RECURSE _files ${LT_SRC}/${_layer}/*.h ${LT_SRC}/${_layer}/*.cpp
       ${LT_SRC}/${_layer}/*.cu ${LT_SRC}/${_layer}/*.cuh)
  foreach(_file ${_files})
    file(STRINGS ${_file} _includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[^\"/]+/")
    foreach(_line ${_includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"/]+)/.*" "\\1" _used "${_line}")
      list(FIND LT_LAYERS ${_used} _used_rank)
      if(_used_rank GREATER _rank)
        file(RELATIVE_PATH _rel ${LT_SRC} ${_file})
        string(STRIP "${_line}" _line)
        string(APPEND _errors "\n  src/${_rel}: ${_line} (${_layer}/ may use only the layers below it)")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_errors)
  list(JOIN LT_LAYERS " < " _order)
  message(FATAL_ERROR "A layer includes a header of a layer above it (${_order}):${_errors}")
endif()
