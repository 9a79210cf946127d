"""Loader layer: glibc's search (ld.so.cache, RPATH chain, RUNPATH), a simulated process load (doctor),
real loads in a clean process (loadprobe) and LD_DEBUG traces. Uses the ELF layer only."""
