# gpu_check.cpu_refs (label cli): bench/gpu/run.sh compares CUDA losses with bench/gpu/refs_cpu.json. This runs every
# case of bench/gpu/cases.txt on the CPU and checks the committed losses still are what the CPU computes (the
# comparison's own tolerances), so that a change of numerics that forgets to refresh them fails here, not on a GPU
# machine. The 16-bit cases run with cpu_lowp=widen, whose rounding is the same on every CPU kind (cases.txt gives
# the measured spread), so the committed losses hold on AVX2 and AVX-512 machines alike. Needs the cases' example
# binaries and, for the multi-rank cases, mpirun.
set(_gpu_case_targets llama-fp32 llama-bf16true llama-fsdp-fp32 t5-fp32 vit-fp32 blip2-t5-fp32)
set(_have_gpu_case_targets TRUE)
foreach(_t IN LISTS _gpu_case_targets)
  if(NOT TARGET ${_t})
    set(_have_gpu_case_targets FALSE)
  endif()
endforeach()
if(_have_gpu_case_targets AND TESSERA_WITH_MPI)
  add_test(NAME gpu_check.cpu_refs COMMAND bash -c
    "dir=$(mktemp -d) && trap 'rm -rf \"$dir\"' EXIT && \
     bash '${PROJECT_SOURCE_DIR}/bench/gpu/cases.sh' cpu '${CMAKE_BINARY_DIR}/examples' \"$dir\" && \
     python3 '${PROJECT_SOURCE_DIR}/bench/gpu/losses.py' compare '${PROJECT_SOURCE_DIR}/bench/gpu/refs_cpu.json' \"$dir\"")
  set_tests_properties(gpu_check.cpu_refs PROPERTIES LABELS cli TIMEOUT 900)
endif()
