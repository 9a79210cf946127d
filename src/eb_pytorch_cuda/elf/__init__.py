"""ELF layer: read dynamic sections and symbols (pyelftools and a fast mmap reader), write NEEDED
entries (the patchelf binary, atomically). Knows nothing of EasyBuild, cuDNN or the loader's rules."""
