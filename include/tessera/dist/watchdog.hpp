#pragma once
// defines: tessera::dist::watchdog, the collective watchdog (as NCCL's in torch.distributed): a thread per rank
// that ends the job when a collective has waited longer than collective_timeout_s. A rank that stops answering
// (stuck, paused, on a dead node) otherwise leaves every other rank blocked in its next collective for ever.
//   start(timeout_s, rank, size)  arms it (0 = no limit; runs of one rank need none); calls nest, each ending
//                                 with a stop(): the thread runs from the first start() to the last stop(), and
//                                 the latest start() sets the limit, the rank and the size
//   Guard g("all-reduce", bytes)  marks a collective in flight on this rank, from its call (or its wait) to
//                                 its completion; nested guards count as the outermost
//   set_step(s)                   the optimizer step the rank is in, for the message
// On expiry the watchdog prints, on stderr,
//   [rank r/W] collective watchdog: all-reduce of 4.2 MB in step 7 has waited 600.0 s (collective_timeout_s=600):
//   another rank of its group is stuck or gone; ending the job
// and ends the process with exit code 124; the launcher (mpirun, srun) then ends the others, and every other rank
// waiting on the same collective says the same. note(fd) writes the in-flight collective from a signal handler
// (core/partial_files.hpp), so a rank ended by the launcher after another rank died names what it waited in.
#include <cstdint>

namespace tessera::dist::watchdog {

void start(double timeout_s, int rank, int size);
// Ends the start() it matches; the last one stops the thread (a later start() re-arms it).
void stop();

// start() for a scope: tessera::main holds one from before MPI starts to after it ends, so communicator creation,
// the ranks' agreement and MPI_Finalize are watched too; Trainer::run holds another.
class Armed {
 public:
  Armed(double timeout_s, int rank, int size) { start(timeout_s, rank, size); }
  ~Armed() { stop(); }
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;
};
void set_step(std::int64_t step);

class Guard {
 public:
  Guard(const char* what, std::int64_t bytes);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

// Async-signal-safe: writes "[rank r/W] stopped while in <collective> of step s, for x s" to fd when a collective
// is in flight, nothing otherwise.
void note(int fd);

}  // namespace tessera::dist::watchdog
