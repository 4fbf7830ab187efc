# The embedded model is found after `cmake --install --prefix P` (P/share/mamba.cpp/models/...,
# next to P/bin/mamba-cli), and $MAMBA_MODEL overrides it. -DBUILD=<build dir>.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
file(REMOVE_RECURSE ${WORK}/inst)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/inst
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed:\n${err}")
endif()
set(installed ${WORK}/inst/share/mamba.cpp/models/mamba2-books-7m-bpe8k)
# The model's files only, not the tests' reference data kept beside it in the source tree.
foreach(f config.json generation_config.json model.safetensors tokenizer.json)
  if(NOT EXISTS ${installed}/${f})
    message(FATAL_ERROR "not installed: ${installed}/${f}")
  endif()
endforeach()
foreach(f reference.json reference.safetensors greedy_margins.json)
  if(EXISTS ${installed}/${f})
    message(FATAL_ERROR "test data installed with the model: ${installed}/${f}")
  endif()
endforeach()
file(READ ${SRC}/models/mamba2-books-7m-bpe8k/reference.json ref)
string(JSON want GET "${ref}" prompts 0 greedy_text)
# The exact tier: the reference's greedy text (the default, auto, computes this bf16 model in the
# bf16 tier on AVX-512 BF16 CPUs, where a greedy token may differ).
execute_process(COMMAND ${WORK}/inst/bin/mamba-cli run -t 1 --precision exact -p "It was a dark and stormy night" -n 5
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
get_filename_component(installed_real ${installed} REALPATH)
if(NOT rc EQUAL 0 OR NOT err MATCHES "model: ${installed_real} \\(mamba2, 12 layers, precision exact\\)")
  message(FATAL_ERROR "the installed mamba-cli should use ${installed_real}:\n${err}")
endif()
string(FIND "${want}" "${out}" pos)
if(out STREQUAL "" OR NOT pos EQUAL 0)
  message(FATAL_ERROR "installed run printed [${out}], expected the start of [${want}]")
endif()
require_shared()
set(other ${SHARED}/models/mamba2-books-16m)
execute_process(COMMAND ${CMAKE_COMMAND} -E env MAMBA_MODEL=${other} ${WORK}/inst/bin/mamba-cli run -t 1 -p "Hello" -n 2
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
get_filename_component(other_real ${other} REALPATH)
if(NOT rc EQUAL 0 OR NOT err MATCHES "model: ${other_real} ")
  message(FATAL_ERROR "MAMBA_MODEL=${other} should be used:\n${err}")
endif()

# fresh_project(<dir> <CMakeLists.txt text>): an empty directory holding only that CMakeLists.txt.
function(fresh_project dir text)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/CMakeLists.txt "${text}")
endfunction()

# The installed library: find_package(mamba_cpp) + mamba::mamba builds examples/greedy.cc, which
# prints what the installed mamba-cli prints (the sanitizer build's static libraries would need
# the consumer built with the same flags: checked in the Release build only).
if(NOT SANITIZE)
  set(consumer ${WORK}/consumer)
  fresh_project(${consumer} "cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
find_package(mamba_cpp 0.1 REQUIRED)
add_executable(app ${SRC}/examples/greedy.cc)
target_link_libraries(app PRIVATE mamba::mamba)
")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${consumer} -B ${consumer}/build -G ${GEN} -DCMAKE_CXX_COMPILER=${CXX}
                          -DCMAKE_PREFIX_PATH=${WORK}/inst -DCMAKE_BUILD_TYPE=Release
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    execute_process(COMMAND ${CMAKE_COMMAND} --build ${consumer}/build OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a project using find_package(mamba_cpp) did not build:\n${out}${err}")
  endif()
  set(prompt "It was a dark and stormy night")
  execute_process(COMMAND ${consumer}/build/app ${installed} ${prompt} 12 OUTPUT_VARIABLE ex RESULT_VARIABLE rc1)
  execute_process(COMMAND ${WORK}/inst/bin/mamba-cli run -m ${installed} -p ${prompt} -n 12 --ignore-eos -t 1
                  OUTPUT_VARIABLE cli ERROR_QUIET RESULT_VARIABLE rc2)
  string(STRIP "${ex}" ex)
  string(STRIP "${cli}" cli)
  if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR ex STREQUAL "" OR NOT ex STREQUAL cli)
    message(FATAL_ERROR "installed library: app printed [${ex}] (exit ${rc1}), mamba-cli [${cli}] (exit ${rc2})")
  endif()
endif()

# pkg-config (a plain Makefile's way): the installed mamba_cpp.pc compiles and links the same
# example, which prints the same text.
find_program(PKG_CONFIG pkg-config)
if(NOT SANITIZE AND PKG_CONFIG)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${WORK}/inst/lib/pkgconfig
                          ${PKG_CONFIG} --cflags --libs --static mamba_cpp
                  OUTPUT_VARIABLE flags ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config mamba_cpp failed:\n${err}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  execute_process(COMMAND ${CXX} -O1 ${SRC}/examples/greedy.cc -o ${WORK}/app_pc ${flags}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "c++ greedy.cc $(pkg-config --cflags --libs --static mamba_cpp) failed:\n${flags}\n${out}${err}")
  endif()
  execute_process(COMMAND ${WORK}/app_pc ${installed} ${prompt} 12 OUTPUT_VARIABLE ex RESULT_VARIABLE rc1)
  string(STRIP "${ex}" ex)
  if(NOT rc1 EQUAL 0 OR NOT ex STREQUAL cli)
    message(FATAL_ERROR "pkg-config build: app printed [${ex}] (exit ${rc1}), mamba-cli [${cli}]")
  endif()
endif()

# add_subdirectory() into a parent project: the library target only — no programs, no install
# rules of ours, and the parent's build type left alone (none here: our modules then get -O2).
if(NOT SANITIZE)
  set(parent ${WORK}/parent)
  fresh_project(${parent} "cmake_minimum_required(VERSION 3.25)
project(parent CXX)
add_subdirectory(${SRC} mamba)
add_executable(app ${SRC}/examples/greedy.cc)
target_link_libraries(app PRIVATE mamba::mamba)
foreach(t mamba-cli mamba-server mamba_server)
  if(TARGET \${t})
    message(FATAL_ERROR \"add_subdirectory made target \${t}\")
  endif()
endforeach()
")
  # The parent asks for compile_commands.json (we set it only as the top-level project): its own
  # sources must be in it beside ours (ours alone had been written when we set it regardless).
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${parent} -B ${parent}/build -G ${GEN} -DCMAKE_CXX_COMPILER=${CXX}
                          -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a parent project with add_subdirectory() did not configure:\n${out}${err}")
  endif()
  file(STRINGS ${parent}/build/CMakeCache.txt bt REGEX "^CMAKE_BUILD_TYPE:")
  if(NOT bt MATCHES "^CMAKE_BUILD_TYPE:[A-Z]*=$")
    message(FATAL_ERROR "add_subdirectory() set the parent's build type: ${bt}")
  endif()
  # Not asked, we write none (a file listing only our sources had appeared in the parent's tree).
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${parent} -B ${parent}/build-plain -G ${GEN} -DCMAKE_CXX_COMPILER=${CXX}
                  OUTPUT_QUIET ERROR_VARIABLE err2 RESULT_VARIABLE rc2)
  if(NOT rc2 EQUAL 0 OR EXISTS ${parent}/build-plain/compile_commands.json)
    message(FATAL_ERROR "a parent that did not ask got a compile_commands.json (or did not configure: ${rc2} ${err2})")
  endif()
  file(READ ${parent}/build/compile_commands.json cc)
  if(NOT cc MATCHES "examples/greedy\\.cc")
    message(FATAL_ERROR "the parent's compile_commands.json lacks the parent's own source (greedy.cc)")
  endif()
  if(NOT cc MATCHES "-O2[^\n]*src/ops/cpu/linear\\.cc" OR NOT out MATCHES "compiled with -O2")
    message(FATAL_ERROR "add_subdirectory() without a build type: the mamba modules are not compiled with -O2:\n${out}")
  endif()
  if(EXISTS ${parent}/build/mamba/cmake_install.cmake)
    file(READ ${parent}/build/mamba/cmake_install.cmake inst_rules)
    if(inst_rules MATCHES "mamba-cli|mamba_cppTargets|share/mamba.cpp")
      message(FATAL_ERROR "add_subdirectory() added install rules to the parent project")
    endif()
  endif()
endif()
