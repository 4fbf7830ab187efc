# HF repo ids looked up in the Hugging Face hub cache: what a missing one says, and where the cache
# is when HOME is unset.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/hub)
set(no_cache_vars -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE -u HF_HOME -u XDG_CACHE_HOME)

# A tokenizer repo missing from the cache: the hint downloads its tokenizer.json alone (as the
# README does), not the whole 40 GB GPT-NeoX-20B checkpoint.
execute_process(COMMAND ${CMAKE_COMMAND} -E env HF_HUB_CACHE=${WORK}/hub
                        ${CLI} run -t 1 -m ${model} --tokenizer EleutherAI/gpt-neox-20b -p hi -n 1
                ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error: tokenizer 'EleutherAI/gpt-neox-20b' not found; looked in:\n"
   OR NOT err MATCHES "\ndownload it with: huggingface-cli download EleutherAI/gpt-neox-20b tokenizer\\.json\n")
  message(FATAL_ERROR "run --tokenizer EleutherAI/gpt-neox-20b (not cached): exit ${rc}\n${err}")
endif()
# A model's hint still downloads the repo.
execute_process(COMMAND ${CMAKE_COMMAND} -E env HF_HUB_CACHE=${WORK}/hub ${CLI} inspect state-spaces/mamba-130m-hf
                ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "\ndownload it with: huggingface-cli download state-spaces/mamba-130m-hf\n")
  message(FATAL_ERROR "inspect state-spaces/mamba-130m-hf (not cached): exit ${rc}\n${err}")
endif()

