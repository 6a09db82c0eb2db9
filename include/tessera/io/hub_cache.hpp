#pragma once
// defines: the Hugging Face hub cache read offline: looks_like_repo_id, hub_cache_location / hub_cache_dir,
// resolve_hub_snapshot, and resolve_model_dir, what model_dir= goes through (a directory, or a hub id such as
// Salesforce/blip2-opt-2.7b already downloaded by from_pretrained or `hf download`).
//
// Each rule is huggingface_hub 1.33's, so that a hub id names the directory Python would load:
//   cache dir   constants.HF_HUB_CACHE: HF_HUB_CACHE, else the legacy HUGGINGFACE_HUB_CACHE, else HF_HOME/hub,
//               else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (~ and $VARS expanded)
//   layout      CACHE/models--ORG--NAME/{refs/REVISION (a commit hash), snapshots/HASH/ (files: symlinks into
//               blobs/), trees/HASH.json (the commit's file list, when the download wrote one)}
//   lookup      snapshot_download(id, revision=..., local_files_only=True): a 40-hex revision is the commit itself,
//               anything else is read from refs/; a snapshot missing a file its tree list names is incomplete
// Nothing is ever downloaded: every miss is a ConfigError naming the id, the revision, the cache searched and the
// command that fetches the model.
#include <filesystem>
#include <string>
#include <string_view>

namespace tessera::io {

// huggingface_hub's validate_repo_id: NAME or ORG/NAME, each part 1-96 characters of [A-Za-z0-9_.-] that starts
// and ends with [A-Za-z0-9_], no "--" or ".." anywhere, not ending in ".git".
bool looks_like_repo_id(std::string_view value);

// The hub cache and the setting that chose it, for messages ("HF_HUB_CACHE=/scratch/hub").
struct HubCacheDir {
  std::filesystem::path path;  // as constants.HF_HUB_CACHE spells it: expanded, not made absolute
  std::string origin;
};

// Read from the environment on each call (tests change it), in huggingface_hub's precedence.
HubCacheDir hub_cache_location();
std::filesystem::path hub_cache_dir();

// The snapshot directory of `repo_id` at `revision` (a branch, tag or commit hash), spelled as snapshot_download
// returns it: the cache dir made absolute with its symbolic links resolved, then models--ORG--NAME/snapshots/HASH.
// ConfigError when the id is not one, the revision is empty, or the cache lacks the repo, the ref, the snapshot or a
// file of the snapshot's tree list.
std::filesystem::path resolve_hub_snapshot(std::string_view repo_id, std::string_view revision,
                                           const HubCacheDir& cache);
std::filesystem::path resolve_hub_snapshot(std::string_view repo_id, std::string_view revision);

// What a model_dir= value means: empty stays empty (the preset); an existing directory is itself, as in
// transformers, whose from_pretrained checks os.path.isdir first; else a hub id's snapshot in hub_cache_dir().
// ConfigError naming the value when it is neither a directory nor a hub id.
std::filesystem::path resolve_model_dir(std::string_view value, std::string_view revision);

}  // namespace tessera::io
