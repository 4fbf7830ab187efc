# Writes an I32 tensor of a safetensors file (default `ppl.ids`, the held-out window of each
# ../shared/models/*/reference.safetensors) as text, one id per line, for
# `mamba-cli perplexity --ids-file` — the README's quantization quality table:
#   cmake -DIN=../shared/models/mamba1-books-16m/reference.safetensors -DOUT=ppl.ids -P scripts/ppl-ids.cmake
#   build/release/mamba-cli perplexity -m ../shared/models/mamba1-books-16m --ids-file ppl.ids
# (CMake only: nothing beyond what the build needs.)
include(${CMAKE_CURRENT_LIST_DIR}/../tests/cli/cli_util.cmake)
if(NOT DEFINED IN OR NOT DEFINED OUT)
  message(FATAL_ERROR "usage: cmake -DIN=FILE.safetensors -DOUT=ids.txt [-DTENSOR=ppl.ids] -P scripts/ppl-ids.cmake")
endif()
if(NOT EXISTS "${IN}")
  message(FATAL_ERROR "${IN}: no such file")
endif()
if(NOT DEFINED TENSOR)
  set(TENSOR ppl.ids)
endif()
write_ppl_ids("${IN}" "${OUT}" "${TENSOR}")
