"""pyunwind: CPython stacks from a live process's or a core file's memory, for gdb, lldb and the
command line. The `pyunwind` command is `pyunwind._cli:main`; `pyunwind gdb-script` and
`pyunwind lldb-script` print the debugger scripts installed with this package."""
