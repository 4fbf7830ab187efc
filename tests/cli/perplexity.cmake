# `perplexity --ids-file` on the 2049 held-out ids (tensor ppl.ids of reference.safetensors, one
# window, 2048 predictions) is within 0.01% of the reference perplexity. -DMODEL_DIR=<model dir>.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
if(MODEL_DIR MATCHES "^SHARED/")
  require_shared()
  string(REGEX REPLACE "^SHARED/" "${SHARED}/" MODEL_DIR "${MODEL_DIR}")
endif()
get_filename_component(name ${MODEL_DIR} NAME)
file(MAKE_DIRECTORY ${WORK})
set(ids_file ${WORK}/ppl-${name}.ids)
# Through scripts/ppl-ids.cmake, the command the README gives for making the ids file.
execute_process(COMMAND ${CMAKE_COMMAND} -DIN=${MODEL_DIR}/reference.safetensors -DOUT=${ids_file} -P ${SRC}/scripts/ppl-ids.cmake
                RESULT_VARIABLE ids_rc ERROR_VARIABLE ids_err)
if(NOT ids_rc EQUAL 0)
  message(FATAL_ERROR "scripts/ppl-ids.cmake failed (${ids_rc}): ${ids_err}")
endif()
file(READ ${MODEL_DIR}/reference.json ref)
string(JSON ref_ppl GET "${ref}" ppl_window ppl)
# The exact tier: the reference is HF transformers' fp32 figure (auto would pick the bf16 tier for
# these bf16 checkpoints on AVX-512 BF16 CPUs: within 0.02%, tests Bf16Tier*).
cli_run_ok(r perplexity -m ${MODEL_DIR} --ids-file ${ids_file} --precision exact)
parse_ppl(got "${r_OUT}")
if(NOT got_N EQUAL 2048)
  message(FATAL_ERROR "${name}: ${got_N} predictions, expected 2048")
endif()
to_scaled(g ${got_PPL} 4)
to_scaled(e ${ref_ppl} 4)
math(EXPR diff "${g} - ${e}")
if(diff LESS 0)
  math(EXPR diff "-${diff}")
endif()
# |Δ| ≤ 0.01% of the reference (+1 unit of the 4-decimal rounding).
math(EXPR tol "${e} / 10000 + 1")
message("${name}: perplexity ${got_PPL} (reference ${ref_ppl}), |Δ| ${diff}e-4 ≤ ${tol}e-4")
if(diff GREATER tol)
  message(FATAL_ERROR "${name}: perplexity ${got_PPL} differs from the reference ${ref_ppl} by more than 0.01%")
endif()
