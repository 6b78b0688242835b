# cmake -DTRAIN_GPT=... -DWORK=dir -P train_gpt_roundtrip.cmake
# train_gpt --save writes the trained weights; --init loads them exactly:
# loading a file and saving it again without training reproduces its bytes,
# and a run started from trained weights begins at a lower loss than a fresh one.
file(MAKE_DIRECTORY ${WORK})
function(run out_var)
  execute_process(COMMAND ${TRAIN_GPT} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_gpt ${ARGN} failed (${rc}): ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
function(first_loss out_var text)
  string(REGEX MATCH "step    0  loss ([0-9.]+)" m "${text}")
  set(${out_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

set(common --batch 4 --seq 32 --optim adamw --lr 1e-2)
run(fresh ${common} --steps 8 --save ${WORK}/a.safetensors)
run(copy ${common} --steps 0 --init ${WORK}/a.safetensors --save ${WORK}/b.safetensors)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/a.safetensors
                ${WORK}/b.safetensors RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "--init then --save changed the weights file")
endif()
run(resumed ${common} --steps 1 --init ${WORK}/a.safetensors)
first_loss(l_fresh "${fresh}")
first_loss(l_resumed "${resumed}")
if(NOT l_resumed LESS l_fresh)
  message(FATAL_ERROR "loss from trained weights ${l_resumed} is not below the fresh ${l_fresh}")
endif()
message(STATUS "round trip exact; step-0 loss fresh ${l_fresh}, from trained weights ${l_resumed}")
