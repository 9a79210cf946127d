"""The NEEDED fix: add entries to a library and prove them (present, resolvable, really loaded).
Uses the ELF and loader layers; knows nothing of EasyBuild."""
