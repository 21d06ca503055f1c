"""The catalog: runspec files, the files shipped beside the code, datasets declared on the command line, scoring protocols."""
