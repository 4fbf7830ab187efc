# CLI end-to-end tests (tests/cli/*.cmake, run with `cmake -P` against the built mamba-cli).
# They read the embedded model from the source tree and reference data from ../shared
# ($MAMBA_SHARED_DIR); a test that needs ../shared prints "SKIP: ..." (skipped) when it is absent.
set(MAMBA_CLI_SHARED "$ENV{MAMBA_SHARED_DIR}")
if(NOT MAMBA_CLI_SHARED)
  get_filename_component(MAMBA_CLI_SHARED ${PROJECT_SOURCE_DIR}/../shared ABSOLUTE)
endif()
function(mamba_cli_test name script)
  cmake_parse_arguments(T "" "LABELS" "DEFS" ${ARGN})
  set(defs "")
  foreach(d IN LISTS T_DEFS)
    list(APPEND defs -D${d})
  endforeach()
  add_test(NAME cli_${name}
           COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:mamba-cli> -DSRC=${PROJECT_SOURCE_DIR}
                   -DSHARED=${MAMBA_CLI_SHARED} -DWORK=${PROJECT_BINARY_DIR}/cli-test-work/${name} ${defs}
                   -P ${PROJECT_SOURCE_DIR}/tests/cli/${script}.cmake)
  set(labels cli)
  if(T_LABELS)
    list(APPEND labels ${T_LABELS})
  endif()
  set_tests_properties(cli_${name} PROPERTIES LABELS "${labels}" SKIP_REGULAR_EXPRESSION "SKIP: " TIMEOUT 600
                       ENVIRONMENT "MAMBA_MODEL=")
endfunction()

mamba_cli_test(greedy_embedded greedy_embedded)
mamba_cli_test(json_output json_output)
mamba_cli_test(stop_strings stop_strings)
mamba_cli_test(logit_bias logit_bias)
mamba_cli_test(seed seed)
mamba_cli_test(errors errors)
mamba_cli_test(prompt_sources prompt_sources)
mamba_cli_test(eos_fallback eos_fallback)
mamba_cli_test(install install DEFS BUILD=${PROJECT_BINARY_DIR} GEN=${CMAKE_GENERATOR} CXX=${CMAKE_CXX_COMPILER}
               SANITIZE=${MAMBA_SANITIZE})
mamba_cli_test(prompt_ids_fixtures prompt_ids_fixtures)
mamba_cli_test(perplexity_embedded perplexity DEFS MODEL_DIR=${PROJECT_SOURCE_DIR}/models/mamba2-books-7m-bpe8k)
mamba_cli_test(perplexity_windows perplexity_windows)
mamba_cli_test(perplexity_text perplexity_text)
# The 50k-vocabulary 16M models: 2048 × 50280 logits per window; Release only (slow under ASan).
foreach(m mamba1-books-16m mamba2-books-16m)
  mamba_cli_test(perplexity_${m} perplexity DEFS MODEL_DIR=SHARED/models/${m} LABELS slow)
endforeach()
mamba_cli_test(quantize quantize)
mamba_cli_test(cpu_target_log cpu_target_log)
mamba_cli_test(quantize_interrupt quantize_interrupt)
mamba_cli_test(input_validation input_validation)
mamba_cli_test(tokenizer_option tokenizer_option)
mamba_cli_test(hub_cache hub_cache)
mamba_cli_test(llama_flags llama_flags)
mamba_cli_test(out_of_memory out_of_memory DEFS SANITIZE=${MAMBA_SANITIZE})
if(TARGET example_greedy)
  # examples/greedy.cc (the public API only: load, encode, prefill, step, decode) gives the CLI's
  # greedy text, on the embedded model and on a Mamba-1 model from ../shared.
  mamba_cli_test(example_greedy example_greedy DEFS EXAMPLE=$<TARGET_FILE:example_greedy>)
  # examples/continue_state.cc: generate() from a cached prefix's State, branched and continued.
  mamba_cli_test(example_continue_state example_continue_state DEFS EXAMPLE=$<TARGET_FILE:example_continue_state>)
endif()
