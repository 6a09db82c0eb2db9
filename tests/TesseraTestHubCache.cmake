# model_dir= as a Hugging Face hub id (io/hub_cache.hpp) against huggingface_hub 1.33's snapshot_download and
# try_to_load_from_cache, and transformers' cached_file, all with local_files_only=True
# (tests/reference/check_hub_cache.py): caches laid out in a temporary directory by huggingface_hub's own cache
# writers, read under each setting of HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME, by
# branch, tag, pull-request ref and commit hash, and every miss (no cache, repo, ref or snapshot; an incomplete one).
# hub_cache_dump is tessera's side. The negative control hands the comparison one wrong path and must see a mismatch.
add_executable(hub_cache_dump io/hub_cache_dump.cpp)
target_link_libraries(hub_cache_dump PRIVATE tessera::tessera)

set(_check_hub_cache ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_hub_cache.py"
    $<TARGET_FILE:hub_cache_dump>)
tessera_reference_case(reference.hub_cache COMMAND ${_check_hub_cache})
tessera_reference_case(reference.hub_cache_negative_control COMMAND ${_check_hub_cache} --perturb --expect-mismatch)
