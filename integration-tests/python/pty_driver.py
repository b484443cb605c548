"""Runs a command under a real pseudo-terminal, as an operator's terminal would, for
integration-tests/tests/terminal.rs.

argv: OUT COMMAND... The terminal starts at 40 rows x 100 columns. When the command's
output first shows READY, the driver records whether the terminal is in raw mode (sluice
puts it there for the run), resizes it to 50 x 120, and types $PTY_DRIVER_KEYS (default "go" and Enter). It reads
until the terminal closes, then writes OUT as JSON: the output, the exit status, whether
raw mode was seen, and whether the terminal's settings after the run equal those before.
"""

import fcntl
import json
import os
import select
import struct
import sys
import termios
import time

out_path, command = sys.argv[1], sys.argv[2:]
keys = os.environ.get("PTY_DRIVER_KEYS", "go\r").encode()
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
before = termios.tcgetattr(slave)

pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.close(master)
    os.close(slave)
    os.execvp(command[0], command)

output = b""
raw_seen = None
status = None
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    ready, _, _ = select.select([master], [], [], 0.2)
    if ready:
        try:
            output += os.read(master, 65536)
        except OSError:
            ready = []
    if raw_seen is None and b"READY" in output:
        lflag = termios.tcgetattr(slave)[3]
        raw_seen = not (lflag & termios.ECHO) and not (lflag & termios.ICANON)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
        time.sleep(0.3)
        os.write(master, keys)
    if status is None:
        done, waited = os.waitpid(pid, os.WNOHANG)
        if done:
            status = waited
    # The driver holds the terminal open itself: the run is over when sluice has exited
    # and nothing more is to be read.
    if status is not None and not ready:
        break
if status is None:
    os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)

after = termios.tcgetattr(slave)
with open(out_path, "w") as out:
    json.dump(
        {
            "output": output.decode("utf-8", "replace"),
            "exit": os.waitstatus_to_exitcode(status),
            "raw_during_run": raw_seen,
            "restored": before == after,
        },
        out,
    )
