# collectives: MpiCommunicator against raw MPI calls on the same buffers. Run it under MPI:
#   mpiexec -n 2 build/bench/collectives
if(TESSERA_WITH_MPI)
  add_executable(collectives collectives.cpp)
  target_link_libraries(collectives PRIVATE tessera::tessera)
  tessera_use_pch(collectives)
endif()
# ddp_vs_pytorch: tessera's Ddp and FullShard (the example binaries under mpiexec -n 2) against torch DDP and FSDP2
# (transformers' LlamaForCausalLM over gloo, bench/ddp_reference.py) at 2 ranks. A plain program that starts the
# MPI jobs and the torch processes itself:
#   build/bench/ddp_vs_pytorch [batch_size=4] [seq_len=128] [steps=5] [rounds=2]
if(TESSERA_WITH_MPI AND TARGET llama-ddp-fp32 AND TARGET llama-fsdp-fp32)
  add_executable(ddp_vs_pytorch ddp_vs_pytorch.cpp)
  target_link_libraries(ddp_vs_pytorch PRIVATE tessera::tessera tessera_bench_paths)
  add_dependencies(ddp_vs_pytorch llama-ddp-fp32 llama-fsdp-fp32)
  tessera_use_pch(ddp_vs_pytorch)
endif()
