"""gdb commands for the JIT tests only (sourced with -x by jit_harness.gdb_cmd):

    pyunwind-test-regions     print the JIT map of this stop as JSON ([start, end, kind, label])
    pyunwind-test-step-to-jit stepi (at most 100000 times) until the PC is inside JIT code
"""

import json

import gdb

import pyunwind_gdb_jit as jit


class Regions(gdb.Command):
    def __init__(self):
        super().__init__("pyunwind-test-regions", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        st = jit._stop.get()
        gdb.write("@@REGIONS@@%s\n" % json.dumps({"rows": st.rows, "error": st.error,
                                                  "errors": st.jit.errors() if st.jit else None}))


class StepToJit(gdb.Command):
    def __init__(self):
        super().__init__("pyunwind-test-step-to-jit", gdb.COMMAND_RUNNING)

    def invoke(self, arg, from_tty):
        for steps in range(100000):
            st = jit._stop.get()
            r = st.region(int(gdb.parse_and_eval("$pc")) & 0xFFFFFFFFFFFFFFFF)
            if r is not None and r[2] == "jit":
                gdb.write("@@STEPS@@%d\n" % steps)
                return
            gdb.execute("stepi", to_string=True)
        raise gdb.GdbError("PC never reached JIT code")


Regions()
StepToJit()
