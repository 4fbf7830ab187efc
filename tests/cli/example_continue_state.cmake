# examples/continue_state (-DEXAMPLE=...): its two branches, sampled from clones of a prefix's state
# that generate() prefilled once, are the texts `mamba-cli run` samples from the whole prompt with
# the same seeds; its second turn on branch 1 is printed after them.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
execute_process(COMMAND ${EXAMPLE} ${model} OUTPUT_VARIABLE ex ERROR_VARIABLE ex_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "examples/continue_state: exit ${rc}\n${ex_err}")
endif()
foreach(seed 1 2)
  execute_process(COMMAND ${CLI} run -m ${model} -p "The old man looked at the sea and" -n 12 --seed ${seed}
                          --temp 0.8 --top-p 0.95 -t 1
                  OUTPUT_VARIABLE cli ERROR_VARIABLE cli_err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mamba-cli run --seed ${seed}: exit ${rc}\n${cli_err}")
  endif()
  string(FIND "${ex}" "branch ${seed}:${cli}" at)
  if(at EQUAL -1 OR cli STREQUAL "")
    message(FATAL_ERROR "examples/continue_state printed\n[${ex}]\nwithout branch ${seed} = mamba-cli run --seed ${seed}:\n[${cli}]")
  endif()
endforeach()
if(NOT ex MATCHES "\nbranch 1, continued: Then he said[^\n]")
  message(FATAL_ERROR "examples/continue_state: no second turn in\n[${ex}]")
endif()
