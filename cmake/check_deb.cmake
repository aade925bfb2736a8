# CI's check of the Debian package (a ctest test, cmake/install.cmake):
# package this build with CPack, check the package's metadata and files,
# unpack it into a scratch root with `dpkg-deb -x` (no dpkg database, no
# root) and run the program from there: `info`, then one step of the demo,
# whose model, tokenizer and data must come from the unpacked
# usr/share/lazytrain, not from the source tree.
# The program's package must not depend on MLIR or LLVM. With
# -DWITH_PLUGIN=ON (a build with MLIR), the fusion compiler's plugin must
# be in a package of its own (lazytrain-compiler, which the program's
# recommends), unpacked beside the program, and load from there.
# cmake -DBUILD_DIR=<build> -DCPACK=<cpack> -DDPKG_DEB=<dpkg-deb> [-DWITH_PLUGIN=ON]
#       -P check_deb.cmake
set(scratch ${BUILD_DIR}/deb-check)
file(REMOVE_RECURSE ${scratch})
file(MAKE_DIRECTORY ${scratch})

# Runs the command after NAMED; on failure stops the test with its output.
function(must what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${scratch} RESULT_VARIABLE code
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${what} failed (${code}):\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

# Stops the test unless `text` holds `part` (literally).
function(expect_in text part what)
  string(FIND "${text}" "${part}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: expected '${part}' in:\n${text}")
  endif()
endfunction()

# Stops the test if `text` holds `part` (literally).
function(expect_not_in text part what)
  string(FIND "${text}" "${part}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${what}: did not expect '${part}' in:\n${text}")
  endif()
endfunction()

# The one package file matching `pattern` in the output folder.
function(one_package pattern var)
  file(GLOB found ${scratch}/pkg/${pattern})
  list(LENGTH found n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "expected one ${pattern} in ${scratch}/pkg, found ${n}: ${found}")
  endif()
  set(${var} "${found}" PARENT_SCOPE)
endfunction()

must("cpack -G DEB" ${CPACK} -G DEB --config ${BUILD_DIR}/CPackConfig.cmake -B ${scratch}/pkg)
one_package(lazytrain_*.deb debs)

# Runtime dependencies from dpkg-shlibdeps: the libraries every build links;
# never MLIR or LLVM, which only the plugin's package needs.
must("dpkg-deb -f Depends" ${DPKG_DEB} -f ${debs} Depends)
set(depends "${output}")
foreach(package libopenblas libyaml-cpp libfmt libstdc++ libc6)
  expect_in("${depends}" "${package}" "the package's Depends")
endforeach()
foreach(package libmlir libllvm)
  expect_not_in("${depends}" "${package}" "the package's Depends")
endforeach()
must("dpkg-deb -c" ${DPKG_DEB} -c ${debs})
expect_in("${output}" "./usr/bin/lazytrain" "the package's files")
expect_in("${output}" "./usr/share/lazytrain/assets/demo/gsm8k_train_2000.jsonl"
          "the package's files")
expect_in("${output}" "./usr/share/lazytrain/recipes/qwen2.5-7b_24gb.yaml" "the package's files")
expect_not_in("${output}" "liblazytrain_mlir.so" "the package's files")

set(root ${scratch}/root)
must("dpkg-deb -x" ${DPKG_DEB} -x ${debs} ${root})
if(WITH_PLUGIN)
  # The fusion compiler's plugin: a package of its own, beside the program,
  # needing MLIR and this very lazytrain; lazytrain recommends it.
  one_package(lazytrain-compiler_*.deb plugin_deb)
  must("dpkg-deb -f Recommends" ${DPKG_DEB} -f ${debs} Recommends)
  expect_in("${output}" "lazytrain-compiler" "the package's Recommends")
  must("dpkg-deb -f Depends (plugin)" ${DPKG_DEB} -f ${plugin_deb} Depends)
  expect_in("${output}" "libmlir-19" "the plugin package's Depends")
  expect_in("${output}" "lazytrain (= " "the plugin package's Depends")
  must("dpkg-deb -c (plugin)" ${DPKG_DEB} -c ${plugin_deb})
  expect_in("${output}" "./usr/bin/liblazytrain_mlir.so" "the plugin package's files")
  must("dpkg-deb -x (plugin)" ${DPKG_DEB} -x ${plugin_deb} ${root})
endif()
set(program ${root}/usr/bin/lazytrain)
must("lazytrain info" ${CMAKE_COMMAND} -E env --unset=LT_ASSETS_DIR ${program} info)
if(NOT output MATCHES "(^|\n)lazytrain [0-9]+\\.[0-9]+")
  message(FATAL_ERROR "lazytrain info: expected a line 'lazytrain <version>', got:\n${output}")
endif()
if(WITH_PLUGIN)  # found beside the unpacked program, and loaded
  expect_in("${output}" "plugin ${root}/usr/bin/liblazytrain_mlir.so" "lazytrain info")
endif()

must("the demo, one step" ${CMAKE_COMMAND} -E env --unset=LT_ASSETS_DIR ${program} train
     --set train.steps=1 --set out.dir=${scratch}/demo)
expect_in("${output}" "${root}/usr/share/lazytrain/assets/demo/addition/model"
          "the demo's config (model.path from the unpacked assets)")
if(NOT EXISTS ${scratch}/demo/step-1/model.safetensors)
  message(FATAL_ERROR "the demo saved no ${scratch}/demo/step-1:\n${output}")
endif()
# The recipes by name, from the unpacked share/lazytrain/recipes: a name
# that is not one is refused with the list of those there.
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LT_ASSETS_DIR --unset=LT_RECIPES_DIR
                        ${program} train @recipes/no-such.yaml
                WORKING_DIRECTORY ${scratch} RESULT_VARIABLE code OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(code EQUAL 0)
  message(FATAL_ERROR "lazytrain train @recipes/no-such.yaml ran:\n${out}")
endif()
expect_in("${out}" "${root}/usr/share/lazytrain/recipes" "the recipes' folder")
expect_in("${out}" "qwen2.5-7b_24gb.yaml" "the recipes listed")
file(REMOVE_RECURSE ${scratch})
message(STATUS "${debs}: Depends: ${depends}; info and a demo step ran from the unpacked root")
