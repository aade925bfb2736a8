# What can be checked of the Dockerfile without Docker (a ctest test,
# cmake/install.cmake): it is based on NVIDIA's CUDA 13 images, every file
# or folder it COPYs from the build context exists, and those alone are
# enough to configure the build it runs (tests and benchmarks off, as there).
# cmake -DSOURCE_DIR=<repository> -DSCRATCH=<folder> -P check_dockerfile.cmake
file(STRINGS ${SOURCE_DIR}/Dockerfile lines)

set(cuda_13 OFF)
set(sources "")
foreach(line IN LISTS lines)
  if(line MATCHES "^ARG CUDA_IMAGE_VERSION=13\\.")
    set(cuda_13 ON)
  endif()
  # COPY <source>... <destination>; a COPY --from= takes from a stage.
  if(line MATCHES "^COPY " AND NOT line MATCHES "--from=")
    string(REGEX REPLACE "^COPY +" "" args "${line}")
    separate_arguments(args UNIX_COMMAND "${args}")
    list(POP_BACK args)
    list(APPEND sources ${args})
  endif()
endforeach()
if(NOT cuda_13)
  message(FATAL_ERROR "Dockerfile: expected ARG CUDA_IMAGE_VERSION=13.x (NVIDIA's CUDA 13 images)")
endif()
if(NOT sources)
  message(FATAL_ERROR "Dockerfile: no COPY from the build context found")
endif()

file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH}/context)
foreach(source IN LISTS sources)
  if(NOT EXISTS ${SOURCE_DIR}/${source})
    message(FATAL_ERROR "Dockerfile: COPY ${source}: no such file or folder in ${SOURCE_DIR}")
  endif()
  get_filename_component(parent ${SCRATCH}/context/${source} DIRECTORY)
  file(COPY ${SOURCE_DIR}/${source} DESTINATION ${parent})
endforeach()

execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SCRATCH}/context -B ${SCRATCH}/build -DLT_CUDA=OFF
          -DLT_BUILD_TESTS=OFF -DLT_BUILD_BENCH=OFF
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "the Dockerfile's COPYs do not configure on their own:\n${out}")
endif()
file(REMOVE_RECURSE ${SCRATCH})
message(STATUS "Dockerfile: CUDA 13 base; COPY ${sources} exist and configure")
