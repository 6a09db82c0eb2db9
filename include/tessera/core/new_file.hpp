#pragma once
// defines: what every writer of one output file shares (metrics=, trace=, tessera-report's -o, the token cache):
//   file_kind            "a FIFO", "a character device", ...: what a path is, for messages
//   replace_problem      why an output path must not be replaced by a file, or "" when it may
//   create_partial_file  the temporary file an output is written to before it is renamed onto its target
//   remove_stale_partial_files  the temporary files of that name whose process has ended
//   same_file            whether two paths name one existing file (device and inode: links and spellings alike)
// (core/partial_files.hpp removes registered temporary files when the process is killed.)
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// "a regular file", "a directory", "a FIFO", "a socket", "a character device", "a block device", "a symbolic link"
// for the st_mode of a stat.
std::string file_kind(mode_t mode);

// "" when `target` is absent or a regular file (or a link to one), which an output may replace; otherwise what it is,
// e.g. "is a character device, not a regular file" (renaming onto /dev/null as root would turn the device into a
// plain file; a FIFO would block), or "is a directory".
std::string replace_problem(const std::filesystem::path& target);

// A new file beside `target`, named "<target>.partial-<pid>" ("-<pid>-<k>" when that name is taken) and created
// with O_CREAT | O_EXCL | O_NOFOLLOW: no file or symbolic link already there is ever opened, let alone truncated
// (once "ln -s train.bin m.jsonl.partial" made a run's metrics overwrite its data). Registered with
// register_partial_file before it exists. The caller writes through `fd` (or stream_of) and closes it.
struct PartialFile {
  std::filesystem::path path;
  int fd = -1;
};
// Error "cannot create the temporary file m.jsonl.partial-12: Permission denied" (the caller names its setting)
// when no such file can be created. First removes what remove_stale_partial_files finds.
PartialFile create_partial_file(const std::filesystem::path& target);

// Removes the files and directories "<target>.partial-<pid>[-<k>]" of this user whose process has ended (kill(pid,
// 0) says no such process): what a process killed outright (SIGKILL: the launcher after a peer's death, the OOM
// killer) left of its output, which no signal handler could remove. Says each on stderr ("tessera: removed
// m.jsonl.partial-17210, left unfinished by a process that has ended") and returns them. A link, another user's
// entry or a live process's stays. (A writer on another host of a shared file system is seen as ended: two runs
// writing one output path at once are already in conflict.) create_partial_file and StagedDir call it.
std::vector<std::filesystem::path> remove_stale_partial_files(const std::filesystem::path& target);

// True when both paths exist and are one file: the same device and inode, however spelled or linked.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Writes all of `bytes` to `fd`; false (errno set) on a short write.
bool write_all(int fd, std::string_view bytes);

// Opens `out` for writing on the file behind `file.fd` itself (its /proc/self/fd entry; where /proc is absent, its
// name, without truncating or creating), then closes `file.fd`. False when it cannot.
bool open_stream(std::ofstream& out, PartialFile& file);

}  // namespace tessera
