"""gdb command for the tests: `select-python NAME` selects the gdb frame the frame filter shows
Python function NAME at (innermost first) and prints `selected #LEVEL`."""

import gdb
import gdb.frames


class SelectPython(gdb.Command):
    def __init__(self):
        super().__init__("select-python", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        for d in gdb.frames.execute_frame_filters(gdb.newest_frame(), 0, -1):
            if d.function() == arg.strip():
                d.inferior_frame().select()
                gdb.write("selected #%d\n" % d.inferior_frame().level())
                return
        raise gdb.GdbError("no Python frame %s" % arg)


SelectPython()
