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
   OR NOT err MATCHES "\ndownload it with: hf download EleutherAI/gpt-neox-20b tokenizer\\.json\n")
  message(FATAL_ERROR "run --tokenizer EleutherAI/gpt-neox-20b (not cached): exit ${rc}\n${err}")
endif()
# A model's hint still downloads the repo.
execute_process(COMMAND ${CMAKE_COMMAND} -E env HF_HUB_CACHE=${WORK}/hub ${CLI} inspect state-spaces/mamba-130m-hf
                ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "\ndownload it with: hf download state-spaces/mamba-130m-hf\n")
  message(FATAL_ERROR "inspect state-spaces/mamba-130m-hf (not cached): exit ${rc}\n${err}")
endif()

# HOME unset (a systemd unit, env -i): the cache is under the password database's home directory,
# as huggingface_hub (Python's expanduser) finds it, never ".cache/huggingface/hub" relative to the
# working directory.
find_program(ENV_PROGRAM env)
find_program(GETENT getent)
find_program(ID_PROGRAM id)
if(ENV_PROGRAM AND GETENT AND ID_PROGRAM)
  execute_process(COMMAND ${ID_PROGRAM} -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${GETENT} passwd ${uid} OUTPUT_VARIABLE pw OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE pw_rc)
  string(REPLACE ":" ";" pw "${pw}")
  list(LENGTH pw n)
  if(pw_rc EQUAL 0 AND n GREATER 5)
    list(GET pw 5 home)
    foreach(home_setting "-u;HOME" "HOME=")
      execute_process(COMMAND ${ENV_PROGRAM} ${no_cache_vars} ${home_setting} ${CLI} inspect org/no-such-model
                      WORKING_DIRECTORY ${WORK} ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
      if(NOT rc EQUAL 2 OR NOT err MATCHES "\n\\(hub cache root ${home}/\\.cache/huggingface/hub: ")
        message(FATAL_ERROR "inspect with ${home_setting}: exit ${rc}, expected the cache under ${home} (getent passwd):\n${err}")
      endif()
    endforeach()
  endif()
  # A user id with no passwd entry either (a container's --user 4242): the cache is not looked for,
  # and the error says why. Needs root to switch user ids.
  find_program(SETPRIV setpriv)
  execute_process(COMMAND ${GETENT} passwd 4242 RESULT_VARIABLE no_entry OUTPUT_QUIET)
  if(uid EQUAL 0 AND SETPRIV AND NOT no_entry EQUAL 0)
    execute_process(COMMAND ${SETPRIV} --reuid 4242 --regid 4242 --clear-groups ${ENV_PROGRAM} ${no_cache_vars} -u HOME
                            ${CLI} inspect org/no-such-model
                    WORKING_DIRECTORY / ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "error: model 'org/no-such-model' not found: it is no directory, and the Hugging Face hub cache was not looked in: .*HOME is unset or empty, and this user has no home directory .*set HF_HUB_CACHE")
      message(FATAL_ERROR "inspect as uid 4242 without HOME: exit ${rc}\n${err}")
    endif()
  endif()
endif()
