# Installing lazytrain with no build tree: `cmake --install` puts the
# program in bin/, the demo's bundled assets (the model config, the
# tokenizer and the GSM8K rows `lazytrain train` with no arguments reads) in
# share/lazytrain/assets and the recipes in share/lazytrain/recipes; `cpack
# -G DEB` packages the same files. The program finds them relative to itself
# (cli/installed_assets.h).
include(GNUInstallDirs)

set(LT_INSTALL_ASSETS_DIR ${CMAKE_INSTALL_DATADIR}/lazytrain/assets)
install(TARGETS lazytrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT program)
# The fusion compiler plugin goes beside the program, where it looks for it
# (compile/plugin_loader.h), in a component (and package) of its own: it
# alone needs MLIR and LLVM.
if(TARGET lazytrain_mlir)
  install(TARGETS lazytrain_mlir LIBRARY DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT compiler)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/ DESTINATION ${LT_INSTALL_ASSETS_DIR}
        COMPONENT program)
# The recipes beside them: `lazytrain train @recipes/NAME` (train/recipe_names.h).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/recipes/ DESTINATION ${CMAKE_INSTALL_DATADIR}/lazytrain/recipes
        COMPONENT program)

# The assets folder as seen from the program's folder ("../share/..."): the
# same under any prefix, so an unpacked .deb works where it lies.
file(RELATIVE_PATH _lt_assets_from_bin /prefix/${CMAKE_INSTALL_BINDIR}
     /prefix/${LT_INSTALL_ASSETS_DIR})
target_compile_definitions(lazytrain PRIVATE LT_INSTALLED_ASSETS="${_lt_assets_from_bin}")
# The CUDA runtime, cuBLAS and cuDNN live outside the system's library
# folders (/usr/local/cuda); the installed program keeps the folders it was
# linked against as its RUNPATH, so it finds them without LD_LIBRARY_PATH.
set_target_properties(lazytrain PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)

set(CPACK_PACKAGE_NAME lazytrain)
set(CPACK_PACKAGE_VENDOR "lazytrain")
set(CPACK_PACKAGE_CONTACT "lazytrain developers <lazytrain@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Full-precision LLM training on one GPU smaller than the model")
set(CPACK_PACKAGE_DESCRIPTION
    "lazytrain trains and fine-tunes Hugging Face language models with its own tensor, autograd,\
 kernels and allocators, streaming blocks through the GPU from host memory when the model does\
 not fit.")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # lazytrain_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# The runtime dependencies are the packages that own the shared libraries
# the program links (dpkg-shlibdeps): OpenBLAS, yaml-cpp, fmt, COIN-OR CBC,
# liburing, libstdc++, as this build found them. The CUDA libraries come
# from NVIDIA's toolkit in /usr/local/cuda, which no Debian package owns:
# CPack runs dpkg-shlibdeps with --ignore-missing-info, so they get no
# dependency, and a CUDA build needs the CUDA 13 runtime (and cuDNN, when
# it was built with it) installed, as the Docker image's base has them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Two packages: lazytrain (the program and its assets) and, in a build with
# MLIR, lazytrain-compiler (the fusion compiler plugin, whose dependencies
# dpkg-shlibdeps finds: libmlir-19, libllvm19), which lazytrain recommends:
# the program runs without it (train.compile off or auto, and a GPU run
# from cached kernels) and a minimal install leaves MLIR out.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_PROGRAM_PACKAGE_NAME lazytrain)
set(CPACK_COMPONENTS_ALL program)
if(TARGET lazytrain_mlir)
  list(APPEND CPACK_COMPONENTS_ALL compiler)
  set(CPACK_DEBIAN_COMPILER_PACKAGE_NAME lazytrain-compiler)
  set(CPACK_DEBIAN_PROGRAM_PACKAGE_RECOMMENDS lazytrain-compiler)
  # The plugin refuses a program of another version (compile/compiler_plugin.h).
  set(CPACK_DEBIAN_COMPILER_PACKAGE_DEPENDS "lazytrain (= ${PROJECT_VERSION})")
  set(CPACK_COMPONENT_COMPILER_DESCRIPTION
      "The fusion compiler plugin of lazytrain (train.compile), built with MLIR 19:\
 fuses the elementwise and norm chains of the decoder blocks into compiled CPU and GPU kernels.")
endif()
include(CPack)

# CI's check of the package: build it, unpack it into a scratch root and run
# the program from there (cmake/check_deb.cmake), and check that the
# Dockerfile's COPY sources exist (it cannot be built here).
if(LT_BUILD_TESTS)
  # dpkg-shlibdeps (dpkg-dev) and `file` are what CPack's DEB generator
  # needs to find the dependencies.
  find_program(LT_DPKG_DEB dpkg-deb)
  find_program(LT_DPKG_SHLIBDEPS dpkg-shlibdeps)
  find_program(LT_FILE_PROGRAM file)
  if(LT_DPKG_DEB AND LT_DPKG_SHLIBDEPS AND LT_FILE_PROGRAM)
    add_test(NAME package.deb_runs_from_a_scratch_root
             COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR}
                     -DCPACK=${CMAKE_CPACK_COMMAND} -DDPKG_DEB=${LT_DPKG_DEB}
                     -DWITH_PLUGIN=$<TARGET_EXISTS:lazytrain_mlir>
                     -P ${PROJECT_SOURCE_DIR}/cmake/check_deb.cmake)
    set_tests_properties(package.deb_runs_from_a_scratch_root
                         PROPERTIES LABELS "cpu;package" TIMEOUT 300)
  else()
    message(STATUS "dpkg-deb, dpkg-shlibdeps or file not found: the .deb check is not a test here")
  endif()
  add_test(NAME package.dockerfile_copies_existing_files
           COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DSCRATCH=${PROJECT_BINARY_DIR}/dockerfile-check
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_dockerfile.cmake)
  set_tests_properties(package.dockerfile_copies_existing_files PROPERTIES LABELS "cpu;package")
endif()
