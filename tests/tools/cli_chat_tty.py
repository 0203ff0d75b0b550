#!/usr/bin/env python3
"""`ctorch chat` on a terminal (a pseudo-terminal here), built with libedit:
the up arrow recalls the previous line (a command, so nothing reaches the
model), Ctrl-C during a reply stops it, Ctrl-C at the prompt ends the program
with exit code 130 (as shells expect of an interrupted program; tests/tools/cli_io.sh
checks the same without a terminal). Skipped (77) without ../shared/refdata or without libedit.
Usage: cli_chat_tty.py CTORCH_BINARY   (CTORCH_REFDATA names the refdata folder)"""
import os
import pty
import select
import sys
import time

ct = sys.argv[1]
model = os.path.join(os.environ.get("CTORCH_REFDATA", ""), "mini-a", "mini-a-q4_k_m.gguf")
if not os.path.isfile(model):
    print("skipped: refdata absent")
    sys.exit(77)

pid, fd = pty.fork()
if pid == 0:
    os.execv(ct, [ct, "chat", "-m", model, "--seed", "1", "-c", "2048"])
out = b""


def wait_for(pat, seconds=30):
    """Reads the terminal until pat appears (True) or the time is up (False)."""
    global out
    end = time.time() + seconds
    while time.time() < end:
        if pat in out:
            return True
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return False
            if not data:
                return False
            out += data
    return pat in out


def settle(quiet=0.5, seconds=30):
    """Reads until the program has been silent for `quiet` seconds: it waits at the prompt."""
    global out
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], quiet)
        if not r:
            return
        try:
            data = os.read(fd, 4096)
        except OSError:
            return
        if not data:
            return
        out += data


def take():
    global out
    got, out = out, b""
    return got


failed = 0


def check(name, ok):
    global failed
    print(("ok   " if ok else "FAIL ") + name)
    failed += not ok


if not wait_for(b"chat template:") or not wait_for(b"> "):
    check("banner and prompt", False)
    sys.exit(1)
if b"line editing and history on" not in out:
    os.kill(pid, 9)
    print("skipped: built without libedit")
    sys.exit(77)
take()
os.write(fd, b"/stats\r")
check("/stats", wait_for(b"replies: 0"))
settle()
take()
os.write(fd, b"\x1b[A\r")  # up arrow: the previous line again
check("history recalls /stats", wait_for(b"replies: 0"))
wait_for(b"> ")
take()
os.write(fd, b"tell me a long story\r")
time.sleep(1.0)
os.write(fd, b"\x03")  # Ctrl-C during the reply (no -n: it would run to the full context)
check("Ctrl-C stops a reply", wait_for(b"(stopped)"))
settle()
take()
os.write(fd, b"/stats\r")
check("the stopped reply is kept", wait_for(b"replies: 1"))
settle()  # a Ctrl-C before the prompt is up would be taken for one during the command
os.write(fd, b"\x03")  # Ctrl-C at the prompt
status = None
end = time.time() + 30
while time.time() < end:
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        status = st
        break
    settle(0.1, 0.2)  # keeps the terminal drained while the program exits
    time.sleep(0.05)
exited_130 = status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 130
check("Ctrl-C at the prompt exits 130", exited_130)
if not exited_130:
    settle(0.2, 2)
    print("  status %s; the terminal's last output:\n%s" % (status, out.decode(errors="replace")[-1500:]))
if status is None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
sys.exit(1 if failed else 0)
